/* test_head.c — chat_head_length on synthetic id sequences: where the head ends, every
 * "no head" case, multi-token "system", and turn tokens near the end of the prompt. */
#include <criterion/criterion.h>

#include "api/api.h"

/* A ChatML-like vocabulary: IM = <|im_start|>, END = <|im_end|>, SYS = "system",
 * USR = "user", AST = "assistant", NL = "\n", the rest text. */
enum { IM = 900, END = 901, SYS = 10, USR = 11, AST = 12, NL = 13, T1 = 50, T2 = 51, T3 = 52 };

static const int32_t sys1[] = { SYS };

#define HEAD(ids) chat_head_length((ids), (int64_t)HS_ARRAY_LEN(ids), IM, sys1, 1)

Test(head, system_then_user)
{
    const int32_t ids[] = { IM, SYS, NL, T1, T2, END, NL, IM, USR, NL, T3, END, NL, IM, AST, NL };
    cr_assert_eq(HEAD(ids), 7);
}

Test(head, no_system_turn_means_no_head)
{
    const int32_t ids[] = { IM, USR, NL, T1, END, NL, IM, AST, NL };
    cr_assert_eq(HEAD(ids), 0);
    const int32_t text_first[] = { T1, IM, SYS, NL, T2, END, IM, USR, NL };
    cr_assert_eq(HEAD(text_first), 0, "the prompt must open with the turn token");
}

Test(head, system_only_means_no_head)
{
    const int32_t ids[] = { IM, SYS, NL, T1, T2, END, NL };
    cr_assert_eq(HEAD(ids), 0);
    const int32_t bare[] = { IM, SYS };
    cr_assert_eq(HEAD(bare), 0);
}

Test(head, consecutive_system_turns_belong_to_the_head)
{
    const int32_t ids[] = { IM, SYS, NL, T1, END, NL, IM, SYS, NL, T2, END, NL, IM, USR, NL, T3, END };
    cr_assert_eq(HEAD(ids), 12);
    const int32_t late[] = { IM, SYS, NL, T1, END, NL, IM, USR, NL, END, NL, IM, SYS, NL, T2, END };
    cr_assert_eq(HEAD(late), 6, "a system turn after a user turn is past the head");
}

Test(head, no_turn_token_in_vocabulary)
{
    const int32_t ids[] = { IM, SYS, NL, T1, END, NL, IM, USR, NL };
    cr_assert_eq(chat_head_length(ids, (int64_t)HS_ARRAY_LEN(ids), -1, sys1, 1), 0);
    const int32_t neg[] = { -1, SYS, NL, T1, -1, USR };
    cr_assert_eq(chat_head_length(neg, (int64_t)HS_ARRAY_LEN(neg), -1, sys1, 1), 0,
                 "im_start -1 never matches, even against -1 ids");
}

Test(head, degenerate_arguments)
{
    const int32_t ids[] = { IM, SYS, NL, T1, END, NL, IM, USR, NL };
    cr_assert_eq(chat_head_length(ids, 0, IM, sys1, 1), 0);
    cr_assert_eq(chat_head_length(NULL, 5, IM, sys1, 1), 0);
    cr_assert_eq(chat_head_length(ids, (int64_t)HS_ARRAY_LEN(ids), IM, sys1, 0), 0, "no system ids: no head");
    cr_assert_eq(chat_head_length(ids, (int64_t)HS_ARRAY_LEN(ids), IM, NULL, 1), 0);
    cr_assert_eq(chat_head_length(ids, -3, IM, sys1, 1), 0);
    /* a prefix of the same prompt: the head is found once the next turn token is in */
    cr_assert_eq(chat_head_length(ids, 6, IM, sys1, 1), 0);
    cr_assert_eq(chat_head_length(ids, 7, IM, sys1, 1), 6, "a turn token at the very end opens a non-system turn");
}

Test(head, multi_token_system_word)
{
    /* a vocabulary where "system" is two tokens */
    const int32_t sys2[] = { 20, 21 };
    const int32_t ids[] = { IM, 20, 21, NL, T1, END, NL, IM, 20, 21, NL, T2, END, NL, IM, 20, 22, NL, T3, END };
    cr_assert_eq(chat_head_length(ids, (int64_t)HS_ARRAY_LEN(ids), IM, sys2, 2), 14,
                 "a turn whose role only starts like system is not a system turn");
    const int32_t cut[] = { IM, 20, 21, NL, T1, END, IM, 20 };
    cr_assert_eq(chat_head_length(cut, (int64_t)HS_ARRAY_LEN(cut), IM, sys2, 2), 6,
                 "too few ids left to spell system: not a system turn");
    const int32_t short_open[] = { IM, 20 };
    cr_assert_eq(chat_head_length(short_open, 2, IM, sys2, 2), 0);
}

Test(head, system_word_inside_text_does_not_matter)
{
    /* SYS inside the system text and inside the user text changes nothing */
    const int32_t ids[] = { IM, SYS, NL, SYS, T1, SYS, END, NL, IM, USR, NL, SYS, END, NL };
    cr_assert_eq(HEAD(ids), 8);
    /* the turn token right after the system role (an empty system turn) */
    const int32_t empty[] = { IM, SYS, IM, SYS, NL, END, IM, AST };
    cr_assert_eq(HEAD(empty), 6);
}

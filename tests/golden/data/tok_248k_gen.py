# tok_248k_gen.py OUT.json — a synthetic byte-level BPE tokenizer.json the size of the
# Qwen3.5/3.6/3.8 one (tests/golden/tok_248k.sh): 248,320 ids, 247,587 merges, the qwen35
# split regex, NFC. Ids 0..255 are the bytes in GPT-2 order, then every pair of bytes
# (65,536 merges), then pair + byte merges over the commonest 57 characters up to 247,587,
# then tokens no merge makes up to 248,043; added tokens from 248,044 as in Qwen3.5
# (<|endoftext|>, <|im_start|>, <|im_end|>, ..., <think>) and <|extra_N|> up to 248,319.
# Deterministic: the same bytes every run.
import json, sys
# GPT-2 byte map
direct = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
bmap = {}
n = 0
for b in range(256):
    if b in direct: bmap[b] = chr(b)
    else: bmap[b] = chr(256 + n); n += 1
bl = lambda bs: "".join(bmap[x] for x in bs)
order_bytes = direct + [b for b in range(256) if b not in direct]  # GPT-2 id order
vocab = {}
def add(tok):
    assert tok not in vocab, tok
    vocab[tok] = len(vocab)
for b in order_bytes: add(bmap[b])
# the bytes text is made of, most useful first: letters, space, digits, punctuation, the rest
pref = [ord(c) for c in "etaoinsrhldcumfpgwybvkxjqzETAOINSRHLDCUMFPGWYBVKXJQZ 0123456789.,'-\n"]
rank = pref + [b for b in range(256) if b not in pref]
merges = []
for a in rank:                       # every pair of bytes: 65,536 merges
    for c in rank:
        merges.append([bmap[a], bmap[c]]); add(bmap[a] + bmap[c])
need = 247587 - len(merges)          # then pair + byte, letters first, up to Qwen3.5's count
tri = pref[:57]
done = False
for a in tri:
    for c in tri:
        for d in tri:
            if need == 0: done = True; break
            merges.append([bmap[a] + bmap[c], bmap[d]]); add(bmap[a] + bmap[c] + bmap[d]); need -= 1
        if done: break
    if done: break
assert len(merges) == 247587
k = 0
while len(vocab) < 248044:           # tokens no merge makes (the real vocabulary has some)
    add(bl(b"~~" + k.to_bytes(3, "big"))); k += 1
names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
         "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
         "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
         "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
         "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
added = []
i = 248044
for nm in names:
    added.append({"id": i, "content": nm, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": not nm.startswith(("<tool", "</tool", "<think", "</think"))}); i += 1
while i < 248320:                    # up to the 248,320 rows of the real embedding
    added.append({"id": i, "content": f"<|extra_{i - 248044}|>", "single_word": False, "lstrip": False,
                  "rstrip": False, "normalized": False, "special": True}); i += 1
rx = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
      "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
j = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
     "normalizer": {"type": "NFC"},
     "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
         {"type": "Split", "pattern": {"Regex": rx}, "behavior": "Isolated", "invert": False},
         {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
     "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
     "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
     "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
               "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
               "vocab": vocab, "merges": merges}}
for a in added: vocab.setdefault(a["content"], a["id"])
assert len(vocab) == 248320 and sorted(vocab.values()) == list(range(248320))
json.dump(j, open(sys.argv[1], "w"), ensure_ascii=False)

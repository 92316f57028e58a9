#!/bin/sh
# check_includes.sh — fail when a source file includes a module it may not (DESIGN.md §2),
# or a library header outside the modules allowed to touch that library.
set -u
allowed() { # module -> modules it may include (itself implied)
    case $1 in
        base) echo "" ;;
        sys) echo "base" ;;
        kernels) echo "base" ;;
        format) echo "base sys" ;;
        tokenizer) echo "base" ;;
        model) echo "base sys format" ;;
        engine) echo "base sys kernels model format" ;;
        bank) echo "base sys" ;;
        jinja) echo "base" ;;
        api) echo "base tokenizer jinja" ;;
        text) echo "base sys format tokenizer model api" ;;
        server) echo "base sys kernels format tokenizer model engine bank jinja api text" ;;
        cli) echo "base sys kernels format tokenizer model engine bank jinja api text server" ;;
        *) echo "?" ;;
    esac
}
# library header -> modules that may include it
lib_allowed() {
    case $1 in
        jansson.h) echo "format jinja api" ;;
        microhttpd.h) echo "server" ;;
        pcre2.h) echo "tokenizer" ;;
        utf8proc.h) echo "tokenizer" ;;
        sqlite3.h) echo "bank" ;;
        openssl/*) echo "bank sys" ;; # sys: SHA-256 (sha256.c)
        xxhash.h) echo "bank model" ;; # model: the model identity digest (digest.c)
        *) echo "*" ;;
    esac
}
bad=0
for f in $(find src -name '*.[ch]' | sort); do
    mod=$(echo "$f" | cut -d/ -f2)
    grep -n '^[[:space:]]*#[[:space:]]*include' "$f" | while IFS= read -r line; do
        n=${line%%:*}
        inc=$(echo "$line" | sed -n 's/.*#[[:space:]]*include[[:space:]]*[<"]\([^">]*\)[">].*/\1/p')
        case $line in
        *'"'*)
            tmod=$(echo "$inc" | cut -d/ -f1)
            [ "$inc" != "$tmod" ] || { echo "$f:$n: include \"$inc\" must name its module (\"module/file.h\")"; echo x >> /tmp/.hs_inc_bad.$$; continue; }
            [ "$tmod" = "$mod" ] && continue
            case " $(allowed "$mod") " in *" $tmod "*) ;; *)
                echo "$f:$n: module '$mod' may not include '$inc' (DESIGN.md §2)"; echo x >> /tmp/.hs_inc_bad.$$ ;;
            esac
            case $inc in */*_int.h)
                [ "$tmod" = "$mod" ] || { echo "$f:$n: '$inc' is private to module '$tmod'"; echo x >> /tmp/.hs_inc_bad.$$; } ;;
            esac ;;
        *)
            who=$(lib_allowed "$inc")
            [ "$who" = "*" ] && continue
            case " $who " in *" $mod "*) ;; *)
                echo "$f:$n: module '$mod' may not include <$inc> (only: $who)"; echo x >> /tmp/.hs_inc_bad.$$ ;;
            esac ;;
        esac
    done
done
if [ -s /tmp/.hs_inc_bad.$$ ]; then rm -f /tmp/.hs_inc_bad.$$; echo "check-includes: FAILED"; exit 1; fi
rm -f /tmp/.hs_inc_bad.$$
echo "check-includes: ok"

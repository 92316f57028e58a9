#!/bin/sh
# check_includes.sh [--table] — fail when a source file includes a module it may not, or a
# library header outside the modules allowed to touch that library.
#
# The rules are the two tables of docs/DESIGN.md §2 (between the include-rules and
# library-rules markers): that page is the one source of truth, this script only reads it.
# A module with no row there is an error. --table prints the rules as parsed and checks
# that every src/<module>/ has a row (tools/check_docs.sh runs it), and checks no file.
set -u -f # -f: the rules hold patterns (openssl/*) that must not meet the file system
design=${HS_DESIGN_DOC:-docs/DESIGN.md}
[ -f "$design" ] || { echo "check-includes: $design not found"; exit 1; }

# The rows between "<!-- NAME: begin" and "<!-- NAME: end" as "first-cell:second-cell",
# backquotes dropped, commas made spaces, the header and "—" rows empty.
table() { # NAME
    awk -v name="$1" '
        index($0, "<!-- " name ": begin") { on = 1; next }
        index($0, "<!-- " name ": end") { on = 0 }
        on && /^\|/ {
            n = split($0, c, "|")
            if (n < 4) next
            k = c[2]; v = c[3]
            gsub(/[` ]/, "", k); gsub(/`/, "", v); gsub(/,/, " ", v); gsub(/—/, "", v)
            gsub(/^ +| +$/, "", v); gsub(/  +/, " ", v)
            if (k == "" || k ~ /^-+$/ || k == "module" || k == "libraryheader") next
            print k ":" v
        }' "$design"
}
rules=$(table include-rules)
lib_rules=$(table library-rules)
[ -n "$rules" ] || { echo "check-includes: no include-rules table in $design"; exit 1; }
[ -n "$lib_rules" ] || { echo "check-includes: no library-rules table in $design"; exit 1; }
all_modules=$(echo "$rules" | cut -d: -f1 | tr '\n' ' ')

ifs=$IFS nl='
'
# The lookups set a variable instead of printing: they run once per #include line, and a
# command substitution would fork for each.
allowed() { # module -> $ok: the modules it may include (itself implied); "?" without a row
    ok="?"
    IFS=$nl
    for r in $rules; do
        case $r in "$1":*) ok=${r#*:}; break ;; esac
    done
    IFS=$ifs
    [ "$ok" = all ] && ok=$all_modules
    return 0
}
lib_allowed() { # library header -> $who: the modules that may include it; "*" if unlisted
    who="*"
    IFS=$nl
    for r in $lib_rules; do
        case $1 in ${r%%:*}) who=${r#*:}; break ;; esac
    done
    IFS=$ifs
    return 0
}

if [ "${1:-}" = --table ]; then
    echo "$rules" | sed 's/^\([^:]*\):/\1 may include: /'
    echo "$lib_rules" | sed 's/^\([^:]*\):/<\1> only in: /'
    missing=0
    for d in $(find src -mindepth 1 -maxdepth 1 -type d | sort); do
        m=$(basename "$d")
        allowed "$m"
        [ "$ok" = "?" ] && { echo "check-includes: module '$m' has no row in $design"; missing=1; }
    done
    exit $missing
fi

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
            allowed "$mod"
            if [ "$ok" = "?" ]; then
                echo "$f:$n: module '$mod' has no row in the include table of $design"; echo x >> /tmp/.hs_inc_bad.$$
            else
                case " $ok " in *" $tmod "*) ;; *)
                    echo "$f:$n: module '$mod' may not include '$inc' ($design §2)"; echo x >> /tmp/.hs_inc_bad.$$ ;;
                esac
            fi
            case $inc in */*_int.h)
                [ "$tmod" = "$mod" ] || { echo "$f:$n: '$inc' is private to module '$tmod'"; echo x >> /tmp/.hs_inc_bad.$$; } ;;
            esac ;;
        *)
            lib_allowed "$inc"
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

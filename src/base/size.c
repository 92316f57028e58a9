/* size.c — human byte sizes: parsing "8G"/"512MiB" and printing "1.50 GiB". */
#include "base/base.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

int64_t hs_parse_size(const char *s)
{
    if (!s || !*s) return -1;
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0 || !isfinite(v)) return -1;
    while (isspace((unsigned char)*end)) end++;
    static const struct { const char *suffix; double mul; } units[] = {
        { "", 1 }, { "b", 1 },
        { "k", 1024.0 }, { "kb", 1024.0 }, { "kib", 1024.0 },
        { "m", 1048576.0 }, { "mb", 1048576.0 }, { "mib", 1048576.0 },
        { "g", 1073741824.0 }, { "gb", 1073741824.0 }, { "gib", 1073741824.0 },
        { "t", 1099511627776.0 }, { "tb", 1099511627776.0 }, { "tib", 1099511627776.0 },
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(units); i++) {
        if (strcasecmp(end, units[i].suffix) == 0) {
            double b = v * units[i].mul;
            if (b > 9.0e18) return -1;
            return (int64_t)b;
        }
    }
    return -1;
}

const char *hs_format_size(uint64_t bytes, char *buf, size_t buf_len)
{
    static const char *const names[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < HS_ARRAY_LEN(names)) { v /= 1024.0; u++; }
    if (u == 0) snprintf(buf, buf_len, "%llu B", (unsigned long long)bytes);
    else snprintf(buf, buf_len, "%.2f %s", v, names[u]);
    return buf;
}

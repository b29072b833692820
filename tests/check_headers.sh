#!/usr/bin/env bash
# Every header compiles on its own (no hidden include-order dependencies).
# Usage: check_headers.sh CC SRC_DIR GEN_DIR
set -uo pipefail
CC=$1 SRC=$2 GEN=$3
fails=0 n=0
for h in $(cd "$SRC" && find . -name '*.h' | sort); do
    n=$((n + 1))
    if ! echo "#include \"${h#./}\"" | "$CC" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fsyntax-only \
            -I"$SRC" -I"$GEN" $(pkg-config --cflags jansson) -x c - ; then
        echo "not self-contained: src/${h#./}"
        fails=$((fails + 1))
    fi
done
echo "$n headers, $fails not self-contained"
[ "$fails" -eq 0 ]

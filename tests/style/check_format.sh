#!/usr/bin/env bash
# Fails if any C++/CUDA source of the project differs from what clang-format (.clang-format at the
# root) would make of it. Fix with: clang-format -i <file>
set -euo pipefail
cd "$(dirname "$0")/../.."
clang_format=${1:-clang-format}
mapfile -t files < <(find common tools tests chapters bench -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) 2>/dev/null | sort)
"$clang_format" --dry-run -Werror "${files[@]}"
echo "${#files[@]} files formatted as .clang-format says"

#!/usr/bin/env bash
# The docs name only what exists: every relative link of every tracked Markdown file points at a
# tracked file or directory (its #anchor, if any, at a heading of that file), and every
# `make <target>` written in the Markdown files, the chart's comments and the examples is a
# target of the Makefile. Run by `make check`; no bed, no network.
#
#   e2e/docs-check.sh            prints each broken reference; non-zero if there is one
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 2

bad=0
broken() { echo "docs-check: $*"; bad=$((bad + 1)); }

# A heading's GitHub anchor: lower case, punctuation dropped, spaces to dashes.
anchors_of() {
  sed -n 's/^#\{1,6\} \{1,\}//p' "$1" | tr '[:upper:]' '[:lower:]' |
    sed -e 's/`//g' -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

mapfile -t docs < <(git ls-files '*.md')
((${#docs[@]} > 0)) || { echo "docs-check: no tracked Markdown file found" >&2; exit 2; }
targets=("")
links=0
for doc in "${docs[@]}"; do
  dir="$(dirname "$doc")"
  # Inline links [text](target), outside code spans; http(s), mailto and in-page anchors apart.
  while IFS= read -r target; do
    links=$((links + 1))
    target="${target%% *}" # [text](path "title")
    path="${target%%#*}"
    anchor=""
    [[ "$target" != *"#"* ]] || anchor="${target#*#}"
    if [[ -z "$path" ]]; then
      file="$doc"
    else
      file="$(realpath -m --relative-to="$root" "$dir/$path")"
      if [[ "$file" == ../* ]] || ! { [[ -d "$file" ]] || git ls-files --error-unmatch "$file" >/dev/null 2>&1; }; then
        broken "$doc: link to $target: no such file in the repository"
        continue
      fi
    fi
    if [[ -n "$anchor" && "$file" == *.md ]]; then
      # shellcheck disable=SC2312 # an unreadable file has no anchors: reported as broken
      grep -qxF -- "$anchor" <(anchors_of "$file") || broken "$doc: link to $target: $file has no heading #$anchor"
    fi
  done < <(sed 's/`[^`]*`//g' "$doc" | grep -oE '\]\([^)[:space:]][^)]*\)' | sed 's/^](//; s/)$//' |
    grep -vE '^(https?:|mailto:)')
done

# `make <target>` in the docs, the chart's comments and the examples' comments.
mapfile -t made < <(git ls-files '*.md' 'charts/*' 'examples/*' .ci/run |
  xargs grep -ohE '(^|[^a-zA-Z0-9_.-])make( [A-Z_]+=[^ ]+)* [a-z][a-z0-9-]*' |
  sed -E 's/.*make( [A-Z_]+=[^ ]+)* //' | sort -u)
# Targets: the Makefile's rules (a line "name: ..." or "name other: ...").
mapfile -t targets < <(grep -oE '^[a-z][a-z0-9 -]*:' Makefile | tr -d ':' | tr ' ' '\n' | sed '/^$/d' | sort -u)
for t in "${made[@]}"; do
  # English words after "make" in prose ("make sure", "make it") are no targets, nor the
  # placeholder of "make bench-<name>".
  case "$t" in bench- | sure | it | the | a | an | them | this | that | room | up | do | one | every | sense) continue ;; esac
  printf '%s\n' "${targets[@]}" | grep -qxF -- "$t" || broken "\`make $t\` is written in the docs but the Makefile has no target $t"
done

echo "docs-check: ${#docs[@]} Markdown files, $links relative links, ${#made[@]} make targets named; $bad broken"
((bad == 0))

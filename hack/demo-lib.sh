# What hack/demo.sh and hack/demo-k8s.sh print with: a bold step heading (plain text when not on
# a terminal), each command echoed so it can be pasted back and then run with its exit code
# shown, and a failure that stops the demo. Sourced, not run.
bold=""; plain=""
if [ -t 1 ]; then # bold only on a terminal: a file or a pipe gets plain text
  bold=$(tput bold 2>/dev/null || true); plain=$(tput sgr0 2>/dev/null || true)
fi
step() { printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"; }
# Echoes the command so it can be pasted back (quoted where a word needs it), runs it, shows rc.
show() {
  local word line="\$"
  for word in "$@"; do
    case $word in
      *[!A-Za-z0-9_./:=@,+-]* | "") line+=" '${word//\'/\'\\\'\'}'" ;;
      *) line+=" $word" ;;
    esac
  done
  printf '%s\n' "$line"
  "$@"
  local rc=$?
  printf '(exit %d)\n' "$rc"
  return $rc
}
fail() { printf '\nDEMO FAILED: %s\n' "$*" >&2; exit 1; }

# Sourced by scripts/deps/*.sh: `with_progress LABEL COMMAND...` runs a long, quiet command
# (a source build, a large download) and prints a line every PROGRESS_INTERVAL seconds
# (default 30) while it runs, so that a setup that takes minutes is not mistaken for a hang.
with_progress() {
    local label="$1"
    shift
    local interval="${PROGRESS_INTERVAL:-30}" started=$SECONDS status=0 beat
    echo "$label ..."
    (
        while sleep "$interval"; do
            echo "  ... still $label ($((SECONDS - started)) s)"
        done
    ) &
    beat=$!
    "$@" || status=$?
    kill "$beat" 2>/dev/null || true
    wait "$beat" 2>/dev/null || true
    if [ "$status" -eq 0 ]; then
        echo "  done $label in $((SECONDS - started)) s"
    else
        echo "  failed $label after $((SECONDS - started)) s (exit $status)" >&2
    fi
    return "$status"
}

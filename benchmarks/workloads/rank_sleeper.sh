# B8 failure fan-out at scale: a rank that sleeps, in bash so that 512 of them stay light.
# Stamps `start_R`; rank BENCH_FAIL_RANK waits until every rank has stamped its start (all
# BENCH_RANKS of them), then BENCH_FAIL_AFTER seconds more, stamps `fail_R` and exits 1. The
# others stamp `term_R` the moment SIGTERM reaches them and exit at once. $EPOCHREALTIME is a
# bash builtin: no process is started to read the clock. A rank nobody stops ends after
# BENCH_SLEEP seconds.
trap 'echo "$EPOCHREALTIME" > "$BENCH_OUT/term_$RANK"; kill "$child" 2>/dev/null; exit 143' TERM
echo "$EPOCHREALTIME" > "$BENCH_OUT/start_$RANK"
if [ "$RANK" = "$BENCH_FAIL_RANK" ]; then
    shopt -s nullglob
    give_up=$((SECONDS + 120))
    while :; do
        started=("$BENCH_OUT"/start_*)
        [ "${#started[@]}" -ge "$BENCH_RANKS" ] && break
        [ "$SECONDS" -ge "$give_up" ] && break
        sleep 0.05
    done
    sleep "$BENCH_FAIL_AFTER"
    echo "$EPOCHREALTIME" > "$BENCH_OUT/fail_$RANK"
    exit 1
fi
sleep "$BENCH_SLEEP" &
child=$!
wait "$child"

# Background jobs with wait, and their statuses.
(sleep 2; echo slow) &
slow=$!
(sleep 1; echo fast; exit 5) &
fast=$!
wait $fast; echo "fast exited $?"
wait $slow; echo "slow exited $?"
for i in 1 2 3; do (sleep $i; echo "job $i") & done
wait
echo "all waited"
sleep 100 &
victim=$!
kill $victim
wait $victim; echo "killed job: $?"
sh -c 'kill -9 $$'; echo "self-killed: $?"

# Pipelines: data through several processes, and a pipeline's status.
printf 'pear\napple\nfig\napple\n' | sort | uniq -c | sort -rn | head -2
echo one two three | tr ' ' '\n' | wc -l
seq 1 200 | grep 7 | tail -3
false | true; echo "last true: $?"
true | false; echo "last false: $?"
set -o pipefail
false | true; echo "pipefail: $?"
set +o pipefail
! true; echo "negated: $?"
yes | head -3

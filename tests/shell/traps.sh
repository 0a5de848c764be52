# trap on EXIT and on signals, kill to the shell itself.
trap 'echo exit trap ran' EXIT
trap 'echo got USR1' USR1
kill -USR1 $$
echo after USR1
trap 'echo got TERM; caught=yes' TERM
kill -TERM $$
echo "caught=$caught"
trap - USR1
sh -c 'trap "echo sub INT" INT; kill -INT $$; echo sub done'
sh -c 'trap "echo inner exit" EXIT; exit 3'; echo "inner status $?"
exit 6

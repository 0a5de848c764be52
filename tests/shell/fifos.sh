# Named pipes: mkfifo, a writer in the background and a reader, each open
# waiting for the other; a second round the other way round; then the node.
mkdir fifo-dir && cd fifo-dir
mkfifo p
(echo one; echo two; echo three) > p &
sort -r < p
wait
echo "writer done: $?"
cat p > got &
printf 'late\nreader\n' > p
wait
cat got
ls -l p | cut -c1
[ -p p ] && echo "a FIFO"
mkfifo p 2>/dev/null || echo "mkfifo again fails"
rm p got
cd .. && rmdir fifo-dir
echo end

# Loops over files the script creates; find, sort, xargs, tar and gzip.
mkdir -p tree/a/b tree/c && cd tree
for n in 3 1 2; do echo "file $n" > a/f$n.txt; done
echo deep > a/b/deep.txt
printf 'x\ny\n' > c/two.txt
for f in a/*.txt; do echo "$f: $(cat $f)"; done
find . -type f | sort
find . -name '*.txt' | sort | xargs cat | sort | uniq
find . -type d | sort | xargs echo dirs:
ls a | sort -r
i=0; while [ $i -lt 5 ]; do i=$((i + 1)); echo $i >> count.txt; done; wc -l < count.txt
cd ..
tar cf tree.tar tree && gzip -9 tree.tar && ls tree.tar.gz
mkdir -p back && cd back && gzip -dc ../tree.tar.gz | tar xf - && cd ..
find back -type f | sort | while read -r f; do cmp "$f" "${f#back/}" && echo "same: $f"; done
echo hello | gzip | gzip -d
rm -r tree back tree.tar.gz; ls
printf '#!/usr/bin/busybox sh\necho "script got $1"\nexit 8\n' > run-me
chmod +x run-me
./run-me arg; echo "script status $?"
rm run-me

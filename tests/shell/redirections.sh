# Redirections and here-documents.
mkdir -p redir && cd redir
echo first > out.txt
echo second >> out.txt
cat < out.txt
ls no-such-file 2> err.txt; echo "ls status $?"
grep -c 'No such file' err.txt
{ echo to-stdout; echo to-stderr >&2; } > both.txt 2>&1
sort both.txt
exec 3> fd3.txt
echo via fd 3 >&3
exec 3>&-
cat fd3.txt
name=world
cat <<END
hello $name
  $(echo substituted) and $((6 * 7))
END
cat <<'END'
not $expanded here
END
tr a-z A-Z <<-END
	tabs stripped
	END
while read -r a b; do echo "[$a|$b]"; done <<END
1 one
2 two words
END
: > empty.txt; wc -c < empty.txt

# Subshells, command substitution, functions, exit statuses.
x=outer
(x=inner; echo "in subshell: $x"; exit 4); echo "subshell status $? x=$x"
y=$(echo a; echo b)
echo "captured: $y"
n=`expr 3 + 4`; echo "backticks: $n"
nested=$(echo $(echo $(echo deep)))
echo "$nested"
echo "count: $(printf 'a\nb\nc\n' | wc -l)"
f() { echo "f got $# args: $*"; return 3; }
f x y z; echo "f returned $?"
g() { local v=local; echo $v; }
g; echo "v is '${v:-unset}'"
sh -c 'exit 9'; echo "child sh exited $?"
( cd / && pwd ); pwd >/dev/null
if grep -q x /dev/null; then echo found; else echo "not found: $?"; fi
case abc in a*) echo "case matched";; *) echo nope;; esac
echo "${#x} ${x%er} ${x#ou}"
set -- p q r; shift; echo "after shift: $@"

# Reads a kilnc memory-plan.txt; fails unless every persistent buffer lies
# inside the persistent region [0, P), no two persistent buffers share a
# byte, and every activation starts at or after P (persistent bytes are
# never reused). Prints "persistent region ok: N buffers".
/^arena [0-9]+ bytes; persistent region \[0, / {
  p = $7; sub(/\),$/, "", p); p += 0
}
/^[0-9]+ [0-9]+ [0-9]+ / {
  offset = $2 + 0; bytes = $3 + 0
  if ($4 == "persistent") {
    if (offset + bytes > p) { print "persistent buffer " $1 " ends past " p; bad = 1 }
    n = n + 1; start[n] = offset; end[n] = offset + bytes; id[n] = $1
  } else if (offset < p) {
    print "activation " $1 " at " offset " inside the persistent region"; bad = 1
  }
}
END {
  if (p == 0) { print "no persistent region line"; exit 1 }
  for (i = 1; i <= n; i++)
    for (j = i + 1; j <= n; j++)
      if (start[i] < end[j] && start[j] < end[i] && end[i] > start[i] && end[j] > start[j]) {
        print "persistent buffers " id[i] " and " id[j] " overlap"; bad = 1
      }
  if (bad) exit 1
  print "persistent region ok: " n " buffers"
}

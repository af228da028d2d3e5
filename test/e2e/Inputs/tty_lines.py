"""Reads what a terminal received (`script`'s output) and prints the widest
in-place progress line (the text between carriage returns that holds
"| loss"), colour codes removed, and how many there were:
    tty_lines.py TYPESCRIPT
"""
import re
import sys

text = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
text = re.sub(r"\x1b\[[0-9;]*m", "", text)
pieces = [p for line in text.split("\n") for p in line.split("\r") if "| loss" in p]
print("progress lines: %d, widest %d" % (len(pieces), max((len(p.rstrip()) for p in pieces), default=0)))

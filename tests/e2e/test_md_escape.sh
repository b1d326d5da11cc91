#!/usr/bin/env bash
# Issue 16 item 8: Markdown injection. `crashpack report` prints every string it takes from a
# bundle through common/mdesc.c, so a ticket shows hostile text as text.
#
# A real crash (cp-abort through the kernel's core_pattern), then its manifest.json forged with
# tests/tools/bundle_edit: hostname, exe, comm and cmdline carry raw HTML (<img onerror>, <script>),
# a link, an image, a bare URL, table pipes, a heading marker, emphasis and a backtick run.
# The report is rendered to HTML twice, with Python-Markdown (/usr/bin/python3, python3-markdown)
# and with GitHub's cmark-gfm (tables and autolinks on) when present, and the HTML must hold no
# <img>, no <a>, no <script>, no element but the report's own; the table keeps its row count.
# Also: a backtick run in a code span / block cannot close it (cp_md_code, cp_md_fence_len).
source "$(dirname "$0")/../lib.sh"
cp_setup
cp_install
/usr/bin/python3 -c 'import markdown' 2>/dev/null || die "python3-markdown is missing: scripts/deps.sh installs it"

pid=$(cp_crash "$CP_BIN/cp-abort")
B=$(cp_bundle_for "$pid" 60) || die "cp-abort: no bundle"
EVIL='<img src=x onerror=alert(1)> [link](http://evil) ![img](http://evil/x.png) | a | b <script>alert(2)</script> *em* _u_ ~~s~~ www.evil.com ``` `'
cp_member "$B" manifest.json > "$T/manifest.json" || die "no manifest.json"
EVIL="$EVIL" /usr/bin/python3 - "$T/manifest.json" <<'PY' || die "cannot forge the manifest"
import json, os, sys
p = sys.argv[1]
d = json.load(open(p))
evil = os.environ["EVIL"]
d["host"]["hostname"] = evil
d["host"]["kernel"] = "#" + evil
d["exe"] = "/tmp/" + evil.replace("/", "")
d["comm"] = evil[:15]
d["cmdline"] = [evil, evil]
json.dump(d, open(p, "w"))
PY
"$CP_BIN/bundle_edit" "$B" "$T/evil.zst" --put manifest.json "$T/manifest.json" || die "bundle_edit"

rc=0
"$CP_BIN/crashpack" report --db "$T/kb.db" "$T/evil.zst" > "$T/r.md" 2> "$T/r.err" || rc=$?
check "report of the forged bundle exits 0 or 1 (partial)" [ "$rc" -le 1 ]
check "the hostile hostname reached the report (escaped)" grep -q 'onerror' "$T/r.md"
check "no raw '<' anywhere in the Markdown outside code" \
    /usr/bin/python3 - "$T/r.md" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
t = re.sub(r"^(`{3,})\n.*?^\1\n", "", t, flags=re.S | re.M)   # fenced blocks
t = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", t)              # code spans
sys.exit(1 if "<" in t else 0)
PY

render_check() { # render_check NAME HTMLFILE: no element but the report's own
    /usr/bin/python3 - "$2" <<'PY'
import sys
from html.parser import HTMLParser
allowed = {"h1", "h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "pre",
           "ul", "li", "em", "strong", "hr", "br"}
bad = []
class P(HTMLParser):
    def handle_starttag(self, tag, attrs):
        if tag not in allowed or attrs and tag != "code" and not (tag in ("th", "td") and all(k == "align" for k, _ in attrs)):
            bad.append((tag, attrs))
P().feed(open(sys.argv[1]).read())
if bad:
    print("unexpected elements:", bad[:5], file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}
/usr/bin/python3 -c 'import markdown, sys; sys.stdout.write(markdown.markdown(open(sys.argv[1]).read(), extensions=["tables", "fenced_code"]))' "$T/r.md" > "$T/r.py.html"
check "Python-Markdown: no <img>, <a>, <script> or other foreign element" render_check py "$T/r.py.html"
check "Python-Markdown: the text is shown (escaped entity in the HTML)" grep -q '&lt;img src=x onerror' "$T/r.py.html"
if command -v cmark-gfm > /dev/null; then
    cmark-gfm -e table -e autolink -e strikethrough "$T/r.md" > "$T/r.gfm.html"
    check "cmark-gfm (tables, autolinks): no <img>, <a>, <script> or other foreign element" render_check gfm "$T/r.gfm.html"
    check "cmark-gfm: the summary table still has its header row and one row per field" \
        bash -c "[ \"\$(grep -c '<tr>' '$T/r.gfm.html')\" -ge 4 ] && ! grep -q '<td> a </td>\|<td>a</td>' '$T/r.gfm.html'"
    check "cmark-gfm: the hostname is shown as text" grep -q '&lt;img src=x onerror=alert(1)&gt;' "$T/r.gfm.html"
else
    echo "note: cmark-gfm not installed, GitHub rendering not checked"
fi

# a backtick run in the content cannot close a code span or block
J=$T/bt.json
"$CP_BIN/crashpack" analyze --json "$T/evil.zst" > "$J" 2>/dev/null
/usr/bin/python3 - "$J" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = next((t for t in d.get("threads", []) if t.get("crashed")), None) or d["threads"][0]
t["name"] = "a``b"
t["frames"][0]["function"] = "```</pre><img src=x>"
json.dump(d, open(sys.argv[1], "w"))
PY
"$CP_BIN/crashpack" report --db "$T/kb.db" --from-json "$J" > "$T/bt.md" 2>/dev/null
check "a thread name with a backtick run gets a longer code-span fence" grep -q '```a``b```' "$T/bt.md"
check "a frame line starting with a backtick run gets a longer block fence" grep -qx '````' "$T/bt.md"
/usr/bin/python3 -c 'import markdown, sys; sys.stdout.write(markdown.markdown(open(sys.argv[1]).read(), extensions=["tables", "fenced_code"]))' "$T/bt.md" > "$T/bt.html"
check "Python-Markdown: the frame's <img> stays inside the code block" render_check bt "$T/bt.html"
if command -v cmark-gfm > /dev/null; then
    cmark-gfm -e table -e autolink "$T/bt.md" > "$T/bt.gfm.html"
    check "cmark-gfm: the frame's <img> stays inside the code block" render_check btg "$T/bt.gfm.html"
fi

# issue 22 item 6: a '|' in a thread name splits no table cell, not even inside a code span (GFM
# splits a row at every unescaped '|'): the deadlock table and the exception row of the summary
D=$T/dl.json
/usr/bin/python3 - "$J" "$D" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
evil = "a|<img src=x onerror=alert(3)>|![i](http://evil/y.png)|b"
d["hang"] = {"snap": True, "reason": "test", "deadlocks": [{"summary": "2 threads wait for each other",
    "threads": [{"tid": 1, "name": evil, "waits_for_mutex": "0x1", "waits_for_mutex_symbol": evil,
                 "owner_tid": 2, "holds": [{"mutex": "0x2", "symbol": evil}], "blocked_in": evil},
                {"tid": 2, "name": evil, "waits_for_mutex": "0x2", "owner_tid": 1,
                 "holds": [{"mutex": "0x1"}], "blocked_in": "pthread_mutex_lock"}]}]}
d["exception"] = {"type": evil, "message": "m", "chain": [], "mro": []}
json.dump(d, open(sys.argv[2], "w"))
PY
"$CP_BIN/crashpack" report --db "$T/kb.db" --from-json "$D" > "$T/dl.md" 2>/dev/null
check "the deadlock table's code spans escape '|'" grep -q '`a\\|<img src=x onerror=alert(3)>\\|' "$T/dl.md"
if command -v cmark-gfm > /dev/null; then
    cmark-gfm --unsafe -e table -e autolink -e strikethrough "$T/dl.md" > "$T/dl.gfm.html"
    check "cmark-gfm: a '|' in a thread name renders no <img> and no foreign element" render_check dl "$T/dl.gfm.html"
    check "cmark-gfm: the deadlock table keeps 5 cells a row" /usr/bin/python3 - "$T/dl.gfm.html" <<'PY'
import re, sys
h = open(sys.argv[1]).read()
t = h[h.index("waits for"):]
t = t[:t.index("</table>")]
rows = re.findall(r"<tr>(.*?)</tr>", t, re.S)
sys.exit(0 if rows and all(len(re.findall(r"<t[dh][ >]", r)) == 5 for r in rows) else 1)
PY
fi
/usr/bin/python3 -c 'import markdown, sys; sys.stdout.write(markdown.markdown(open(sys.argv[1]).read(), extensions=["tables", "fenced_code"]))' "$T/dl.md" > "$T/dl.py.html"
check "Python-Markdown: a '|' in a thread name renders no foreign element" render_check dlp "$T/dl.py.html"
finish

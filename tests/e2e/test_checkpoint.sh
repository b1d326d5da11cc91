#!/usr/bin/env bash
# Acceptance (issue 3, #3): the last checkpoint, through the real kernel core_pattern.
#
# A real torch.save job (Debian python3-torch) under python/crashpack_checkpoint.py, crashing as an
# unprivileged uid: the bundle names the newest checkpoint (path, size, mtime, inode, step, source
# "helper") and the finisher's verdict on it is valid; cut in half, it is truncated and the previous
# one is named as the newest valid; the same through CRASHPACK_CHECKPOINT_DIR; a crash in the middle
# of a save shows the in-progress marker (helper) or the file open for writing (no helper); a
# CRASHPACK_CHECKPOINT that is a symlink to /etc/shadow or a FIFO is recorded as such, not read and
# not waited on; a checkpoint on a mount that never answers (a FUSE mount with no server) times out
# without holding up the bundle; a state file planted by another user is refused. First, unit
# checks of `crashpack checkpoint` on hand-made files of every kind.
source "$(dirname "$0")/../lib.sh"
cp_setup

PY=/usr/bin/python3
FIX=$CP_SRC/fixtures/checkpoint
CK=$CP_BIN/crashpack
CUID=64123 # a uid of its own: /tmp/crashpack-$CUID is ours to create and remove
RUNAS=(setpriv --reuid=$CUID --regid=$CUID --clear-groups env -i PATH=/usr/bin:/bin HOME=/nonexistent)
FUSE_FD_OPEN=0

cleanup_ckpt() {
    if [ "$FUSE_FD_OPEN" = 1 ]; then exec 7>&-; fi # aborts the FUSE connection: nothing hangs
    umount "$T/dead" 2>/dev/null || umount -l "$T/dead" 2>/dev/null || true
    rm -rf "/tmp/crashpack-$CUID"
}
trap 'rc=$?; cleanup_ckpt; (exit $rc); cp_restore' EXIT

# jq-like: jget FILE EXPR (d is the parsed JSON; FILE - reads stdin)
jget() { $PY -c 'import json,sys; d=json.load(sys.stdin if sys.argv[1]=="-" else open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

# extract BUNDLE_OF_PID NAME: sets D to the extracted directory
extract() {
    local pid=$1 name=$2 b
    D=$T/x-$name
    b=$(cp_bundle_for "$pid" 60) || { fail "$name: no bundle for pid $pid"; return 1; }
    mkdir -p "$D"
    tar --zstd -xf "$b" -C "$D" || fail "$name: tar --zstd -xf"
    tar --zstd -tf "$b" > "$D.list"
    [ -f "$D/checkpoint.json" ] || { fail "$name: no checkpoint.json"; return 1; }
}
step_status() { jget "$D/capture.json" "[s['status'] for s in d['steps'] if s['name']=='$1'][0]"; }
step_ms() { jget "$D/capture.json" "int([s['ms'] for s in d['steps'] if s['name']=='$1'][0])"; }
pos() { grep -n "^$1\$" "$D.list" | cut -d: -f1; }
ckdir() { mkdir -p "$1" && chown $CUID:$CUID "$1"; }

$PY -c 'import torch' 2>/dev/null || die "python3-torch is not installed (/usr/bin/python3 -c 'import torch')"

# ---- unit: crashpack checkpoint ----
S=$T/samples
$PY "$FIX/make_samples.py" "$S" || die "make_samples.py failed"
verdict() { "$CK" checkpoint --json --no-scan "$1" | jget - 'd["verdict"], d["valid"]'; }
check "unit: torch.save zip is valid" [ "$(verdict "$S/valid.pt")" = "('valid', True)" ]
"$CK" checkpoint --no-scan "$S/valid.pt" >/dev/null
check "unit: exit 0 for a valid checkpoint" [ $? = 0 ]
check "unit: torch.save zip cut in half is truncated" [ "$(verdict "$S/truncated.pt")" = "('truncated', False)" ]
"$CK" checkpoint --no-scan "$S/truncated.pt" >/dev/null
check "unit: exit 1 for a truncated checkpoint" [ $? = 1 ]
check "unit: zip64.pt really has ZIP64 end records" \
    $PY -c 'import sys; b=open(sys.argv[1],"rb").read(); sys.exit(not (b"PK\x06\x06" in b and b"PK\x06\x07" in b))' "$S/zip64.pt"
check "unit: a ZIP64 zip is valid" [ "$(verdict "$S/zip64.pt")" = "('valid', True)" ]
check "unit: hand-written safetensors is valid" [ "$(verdict "$S/model.safetensors")" = "('valid', True)" ]
check "unit: safetensors missing its tail is truncated" [ "$(verdict "$S/cut.safetensors")" = "('truncated', False)" ]
check "unit: garbage is unreadable" [ "$(verdict "$S/garbage.bin")" = "('unreadable', False)" ]
check "unit: legacy torch.save pickle is unverifiable (valid null)" [ "$(verdict "$S/legacy.pt")" = "('unverifiable', None)" ]
check "unit: the reason names the legacy format" \
    bash -c "'$CK' checkpoint '$S/legacy.pt' | grep -q 'unverifiable (legacy format)'"
mkfifo "$S/fifo.pt"
out=$(timeout 5 "$CK" checkpoint --json --no-scan "$S/fifo.pt")
check "unit: a FIFO is reported without being opened (no hang)" [ "$(echo "$out" | jget - 'd["verdict"], d["reason"]')" = "('unreadable', 'not a regular file (a FIFO): not opened')" ]
mkdir "$S/dir" && cp "$S/valid.pt" "$S/dir/a.pt" && sleep 0.05 && cp "$S/truncated.pt" "$S/dir/b.pt"
out=$("$CK" checkpoint --json "$S/dir/b.pt")
check "unit: next to a truncated one, the newest valid is named" \
    [ "$(echo "$out" | jget - 'd["verdict"], d["newest_valid"]["path"], d["newest_valid"]["verdict"]')" = "('truncated', '$S/dir/a.pt', 'valid')" ]
"$CK" checkpoint >/dev/null 2>&1
check "unit: no PATH is a usage error (exit 2)" [ $? = 2 ]

# ---- the Python helper alone (real torch, as the unprivileged uid) ----
ckdir "$T/hs-run"
"${RUNAS[@]}" CRASHPACK_STATE_DIR="$T/hs-run/state" $PY "$FIX/train_and_crash.py" "$T/hs-run" --helper --no-crash >/dev/null 2>"$T/hs-run.err"
check "helper: a job that does not crash runs normally" [ $? = 0 ]
sf=$(ls "$T"/hs-run/state/checkpoint-*.json 2>/dev/null | head -1)
check "helper: the state dir is 0700, owned by the job's uid" [ "$(stat -c %a:%u "$T/hs-run/state")" = "700:$CUID" ]
check "helper: last save is step2.pt, step 2, its size; two saves recorded" \
    [ "$(jget "$sf" 'd["last"]["path"], d["last"]["step"], d["last"]["size"], len(d["history"])')" = "('$T/hs-run/step2.pt', 2, $(stat -c %s "$T/hs-run/step2.pt"), 2)" ]
check "helper: no in-progress marker nor temporary left after the saves" \
    [ "$(ls -A "$T/hs-run/state" | grep -vc '^checkpoint-[0-9]*\.json$')" = 0 ]
mkdir -p "$T/hs-root/state" && chmod 755 "$T/hs-root/state" && ckdir "$T/hs-root/ck"
"${RUNAS[@]}" CRASHPACK_STATE_DIR="$T/hs-root/state" $PY "$FIX/train_and_crash.py" "$T/hs-root/ck" --helper --no-crash >/dev/null 2>"$T/hs-root.err"
check "helper: a state dir owned by someone else does not fail the job" [ $? = 0 ]
check "helper: ... it says why on stderr and writes nothing there" \
    bash -c "grep -q 'owned by uid 0, not by this user' '$T/hs-root.err' && [ -z \"\$(ls -A '$T/hs-root/state')\" ]"

# ---- end to end ----
echo "checkpoint_timeout = 3" >> "$T/conf"
cp_install
cleanup_ckpt


# 1. helper, valid
ckdir "$T/ck1"
pid=$(cp_crash "${RUNAS[@]}" $PY "$FIX/train_and_crash.py" "$T/ck1" --helper)
if extract "$pid" helper; then
    f=$T/ck1/step2.pt
    check "helper: found, source helper, newest path" \
        [ "$(jget "$D/checkpoint.json" 'd["found"], d["source"], d["path"]')" = "(True, 'helper', '$f')" ]
    check "helper: size and mtime match the file" \
        [ "$(jget "$D/checkpoint.json" 'd["size"], d["mtime"]')" = "($(stat -c %s "$f"), $(stat -c %Y "$f"))" ]
    check "helper: inode, device, type" \
        [ "$(jget "$D/checkpoint.json" 'd["inode"], d["device"], d["type"]')" = "($(stat -c %i "$f"), '$(stat -c %Hd:%Ld "$f")', 'file')" ]
    check "helper: step 2, no save in progress" \
        [ "$(jget "$D/checkpoint.json" 'd["step"], d["save_in_progress"]')" = "(2, False)" ]
    check "helper: verdict valid, checked at capture" \
        [ "$(jget "$D/checkpoint-verdict.json" 'd["verdict"], d["valid"], d["checked_at_capture"], d["path"]')" = "('valid', True, True, '$f')" ]
    check "helper: the verdict checked the same inode" \
        [ "$(jget "$D/checkpoint-verdict.json" 'd["inode"]')" = "$(stat -c %i "$f")" ]
    check "helper: steps ok in capture.json" \
        [ "$(step_status checkpoint.json) $(step_status checkpoint-verdict.json)" = "ok ok" ]
    check "helper: checkpoint.json before core, the verdict after it" \
        [ "$(pos checkpoint.json) $(pos core) $(pos checkpoint-verdict.json)" = "$(printf '%s\n' $(pos checkpoint.json) $(pos core) $(pos checkpoint-verdict.json) | sort -n | xargs)" ]
fi

# 2. helper, the newest checkpoint cut in half after its save
ckdir "$T/ck2"
pid=$(cp_crash "${RUNAS[@]}" $PY "$FIX/train_and_crash.py" "$T/ck2" --helper --truncate-last)
if extract "$pid" helper-cut; then
    check "helper-cut: names step2.pt (helper)" \
        [ "$(jget "$D/checkpoint.json" 'd["source"], d["path"], d["size"]')" = "('helper', '$T/ck2/step2.pt', $(stat -c %s "$T/ck2/step2.pt"))" ]
    check "helper-cut: the helper's recorded size differs from the file's" \
        [ "$(jget "$D/checkpoint.json" 'd["recorded_size"] != d["size"]')" = True ]
    check "helper-cut: verdict truncated, step1.pt is the newest valid" \
        [ "$(jget "$D/checkpoint-verdict.json" 'd["verdict"], d["valid"], d["newest_valid"]["path"], d["newest_valid"]["verdict"]')" = "('truncated', False, '$T/ck2/step1.pt', 'valid')" ]
fi

# 3. CRASHPACK_CHECKPOINT_DIR (no helper), intact then cut
for variant in dir dir-cut; do
    ckdir "$T/ck-$variant"
    ln -s step1.pt "$T/ck-$variant/latest.pt" # a symlink in the directory is never chosen
    extra=()
    [ $variant = dir-cut ] && extra=(--truncate-last)
    pid=$(cp_crash "${RUNAS[@]}" CRASHPACK_CHECKPOINT_DIR="$T/ck-$variant" $PY "$FIX/train_and_crash.py" "$T/ck-$variant" "${extra[@]}")
    extract "$pid" $variant || continue
    f=$T/ck-$variant/step2.pt
    check "$variant: found through CRASHPACK_CHECKPOINT_DIR: step2.pt, size, mtime" \
        [ "$(jget "$D/checkpoint.json" 'd["found"], d["source"], d["path"], d["size"], d["mtime"]')" = "(True, 'env_dir', '$f', $(stat -c %s "$f"), $(stat -c %Y "$f"))" ]
    if [ $variant = dir ]; then
        check "dir: verdict valid" [ "$(jget "$D/checkpoint-verdict.json" 'd["verdict"]')" = valid ]
    else
        check "dir-cut: verdict truncated, step1.pt the newest valid" \
            [ "$(jget "$D/checkpoint-verdict.json" 'd["verdict"], d["newest_valid"]["path"]')" = "('truncated', '$T/ck-$variant/step1.pt')" ]
    fi
done

# 3b. a checkpoint directory the job reaches only through a supplementary group (root:4243, 0770):
# the handler opens it as the job could, with the job's groups, and finds and checks it
mkdir -p "$T/ck-group" && chown 0:4243 "$T/ck-group" && chmod 0770 "$T/ck-group"
RUNAS_G=(setpriv --reuid=$CUID --regid=$CUID --groups=4243 env -i PATH=/usr/bin:/bin HOME=/nonexistent)
pid=$(cp_crash "${RUNAS_G[@]}" CRASHPACK_CHECKPOINT_DIR="$T/ck-group" $PY "$FIX/train_and_crash.py" "$T/ck-group")
if extract "$pid" group; then
    check "group: found through the job's supplementary group: step2.pt, verdict valid" \
        [ "$(jget "$D/checkpoint.json" 'd["found"], d["path"]'):$(jget "$D/checkpoint-verdict.json" 'd["verdict"]')" = "(True, '$T/ck-group/step2.pt'):valid" ]
fi

# 4. a crash in the middle of a save: with the helper (marker), without it (the open file)
ckdir "$T/ck-mid"
pid=$(cp_crash "${RUNAS[@]}" $PY "$FIX/train_and_crash.py" "$T/ck-mid" --helper --crash-mid-save)
if extract "$pid" mid-helper; then
    check "mid-helper: the last completed save (step2.pt) is named" \
        [ "$(jget "$D/checkpoint.json" 'd["source"], d["path"], d["step"]')" = "('helper', '$T/ck-mid/step2.pt', 2)" ]
    check "mid-helper: a save of step3.pt (step 3) was in progress" \
        [ "$(jget "$D/checkpoint.json" 'd["save_in_progress"], d["in_progress"]["path"], d["in_progress"]["step"]')" = "(True, '$T/ck-mid/step3.pt', 3)" ]
    check "mid-helper: step2.pt is valid" [ "$(jget "$D/checkpoint-verdict.json" 'd["verdict"]')" = valid ]
fi
ckdir "$T/ck-mid2"
pid=$(cp_crash "${RUNAS[@]}" $PY "$FIX/train_and_crash.py" "$T/ck-mid2" --crash-mid-save)
if extract "$pid" mid-fd; then
    check "mid-fd: the file open for writing is found (open_fd)" \
        [ "$(jget "$D/checkpoint.json" 'd["source"], d["path"], d["open_for_writing"]')" = "('open_fd', '$T/ck-mid2/step3.pt', True)" ]
    check "mid-fd: it is truncated and step2.pt is the newest valid" \
        [ "$(jget "$D/checkpoint-verdict.json" 'd["verdict"], d["newest_valid"]["path"]')" = "('truncated', '$T/ck-mid2/step2.pt')" ]
fi

# 4b. a container: own pid and mount namespaces, checkpoints on a tmpfs only it can see. The
#     helper names its state file after its namespace pid (1); the collector resolves the path
#     inside the process's root, and the verdict checks the file through the descriptor it passed.
mkdir -p "$T/ck-ns" && touch "$T/ns.mark" && sleep 0.01
unshare --pid --fork --mount-proc --propagation private sh -c \
    "mount -t tmpfs -o mode=0755 none '$T/ck-ns' && chown $CUID:$CUID '$T/ck-ns' && exec ${RUNAS[*]} $PY '$FIX/train_and_crash.py' '$T/ck-ns' --helper" >/dev/null 2>&1 &
wait $! 2>/dev/null
b=
for ((i = 0; i < 300; i++)); do
    # (unshare re-raises the signal and dumps core too: take python's bundle)
    b=$(find "$T/bundles" -name 'crash-*-python3.zst' -newer "$T/ns.mark" | head -1)
    [ -n "$b" ] && break
    sleep 0.1
done
if [ -n "$b" ]; then
    D=$T/x-ns
    mkdir -p "$D" && tar --zstd -xf "$b" -C "$D"
    check "container: the host cannot see the checkpoint" [ ! -e "$T/ck-ns/step2.pt" ]
    check "container: found through the helper (state file of namespace pid 1)" \
        [ "$(jget "$D/checkpoint.json" 'd["found"], d["source"], d["path"], d["state_file"]["path"].endswith("/checkpoint-1.json")')" = "(True, 'helper', '$T/ck-ns/step2.pt', True)" ]
    check "container: the verdict checked it (valid)" \
        [ "$(jget "$D/checkpoint-verdict.json" 'd["verdict"], d["path"]')" = "('valid', '$T/ck-ns/step2.pt')" ]
else
    fail "container: no bundle"
fi

# 5. CRASHPACK_CHECKPOINT as a symlink to /etc/shadow, and as a FIFO: recorded, never opened
ckdir "$T/ck-bad"
ln -s /etc/shadow "$T/ck-bad/shadow.pt"
mkfifo "$T/ck-bad/fifo.pt" && chown $CUID "$T/ck-bad/fifo.pt"
for variant in symlink fifo; do
    target=$T/ck-bad/$variant.pt
    [ $variant = symlink ] && target=$T/ck-bad/shadow.pt
    t0=$(date +%s.%N)
    pid=$(cp_crash "${RUNAS[@]}" CRASHPACK_CHECKPOINT="$target" $PY -c 'import ctypes; ctypes.string_at(0)')
    extract "$pid" $variant || continue
    t1=$(date +%s.%N)
    check "$variant: recorded as a $variant, not found" \
        [ "$(jget "$D/checkpoint.json" 'd["found"], d["source"], d["path"], d["type"]')" = "(False, 'env', '$target', '$variant')" ]
    check "$variant: refused in capture.json, no verdict run" \
        [ "$(step_status checkpoint.json) $(step_status checkpoint-verdict.json)" = "refused skipped" ]
    check "$variant: the collector did not wait (< 1 s)" [ "$(step_ms checkpoint.json)" -lt 1000 ]
    check "$variant: the bundle was published promptly (< 20 s)" \
        $PY -c "import sys; sys.exit(not ($t1 - $t0 < 20))"
done
check "symlink: its target is recorded as text" [ "$(jget "$T/x-symlink/checkpoint.json" 'd["target"]')" = /etc/shadow ]
head -1 /etc/shadow > "$T/shadow.line"
check "symlink: nothing of /etc/shadow entered the bundle" \
    bash -c "! grep -rqF -f '$T/shadow.line' '$T/x-symlink' --exclude=core"

# 6. a dead mount: a FUSE mount whose server never answers (lookups block until killed)
mkdir -p "$T/dead"
exec 7<>/dev/fuse
FUSE_FD_OPEN=1
if mount -t fuse -o fd=7,rootmode=40000,user_id=0,group_id=0,allow_other none "$T/dead" 2>/dev/null; then
    t0=$(date +%s.%N)
    pid=$(cp_crash "${RUNAS[@]}" CRASHPACK_CHECKPOINT="$T/dead/ckpt.pt" $PY -c 'import ctypes; ctypes.string_at(0)')
    if extract "$pid" dead; then
        t1=$(date +%s.%N)
        check "dead mount: checkpoint.json timed out" [ "$(step_status checkpoint.json)" = timeout ]
        check "dead mount: not found, timed out, stuck at the path named" \
            [ "$(jget "$D/checkpoint.json" 'd["found"], d["timed_out"], d["stuck_at"]')" = "(False, True, 'CRASHPACK_CHECKPOINT $T/dead/ckpt.pt')" ]
        check "dead mount: the bundle still came promptly (< 30 s)" $PY -c "import sys; sys.exit(not ($t1 - $t0 < 30))"
    fi
else
    fail "dead mount: cannot mount a server-less FUSE file system"
fi
exec 7>&-
FUSE_FD_OPEN=0
umount "$T/dead" 2>/dev/null || umount -l "$T/dead"

# 7. a state file planted by another user (uid 1) in the crashed uid's default state directory
#    (/tmp/crashpack-$CUID created by uid 1), and in a directory anyone can write
for variant in planted-dir planted-file; do
    rm -rf "/tmp/crashpack-$CUID"
    mkdir -m 0755 "/tmp/crashpack-$CUID"
    if [ $variant = planted-dir ]; then
        chown 1:1 "/tmp/crashpack-$CUID"
    else
        chown $CUID:$CUID "/tmp/crashpack-$CUID" && chmod 0777 "/tmp/crashpack-$CUID"
    fi
    ckdir "$T/ck-$variant"
    "${RUNAS[@]}" $PY "$FIX/train_and_crash.py" "$T/ck-$variant" --helper --wait-file "$T/ck-$variant/go" >/dev/null 2>&1 &
    pid=$!
    for ((i = 0; i < 600; i++)); do [ -e "$T/ck-$variant/go.ready" ] && break; sleep 0.1; done
    setpriv --reuid=1 --regid=1 --clear-groups sh -c \
        "printf '{\"pid\": %d, \"last\": {\"path\": \"/etc/shadow\", \"step\": 99}}' $pid > /tmp/crashpack-$CUID/checkpoint-$pid.json"
    touch "$T/ck-$variant/go"
    wait $pid 2>/dev/null
    extract "$pid" $variant || continue
    check "$variant: the planted state file is refused" \
        [ "$(jget "$D/checkpoint.json" 'd["found"], d["state_file"]["status"]')" = "(False, 'refused')" ]
    check "$variant: capture.json says refused" [ "$(step_status checkpoint.json)" = refused ]
    check "$variant: the planted path is not in checkpoint.json" bash -c "! grep -q /etc/shadow '$D/checkpoint.json'"
done
check "planted-dir: the reason names the directory's owner" \
    bash -c "grep -q 'owned by uid 1, not by the crashed uid $CUID' '$T/x-planted-dir/checkpoint.json'"
check "planted-file: the reason names the writable directory" \
    bash -c "grep -q 'writable by group or others' '$T/x-planted-file/checkpoint.json'"

# 8. nothing to find
rm -rf "/tmp/crashpack-$CUID"
pid=$(cp_crash "${RUNAS[@]}" $PY -c 'import ctypes; ctypes.string_at(0)')
if extract "$pid" none; then
    check "none: absent, verdict skipped" \
        [ "$(step_status checkpoint.json) $(step_status checkpoint-verdict.json)" = "absent skipped" ]
fi
finish

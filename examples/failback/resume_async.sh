#!/bin/sh
# A resume command for `eventlog failback --resume-cmd` that does not wait for the cloud session:
# the worked example of the resume handshake (README, "The resume handshake").
#
#   eventlog failback work.jsonl --probe-cmd 'claude -p "reply PING_OK"' \
#       --resume-cmd 'examples/failback/resume_async.sh {handoff_id}' --stale-after 2h
#
# What it does, in the seed's order (seed 000: look at the tree before touching it, return to a
# person on a conflict, record the result):
#
# 1. Look at the working tree first: HEAD moved from the handoff's saved head, or uncommitted
#    changes by someone else -> answer {"conflict": "..."} and edit nothing.
# 2. Start the cloud session detached and answer {"started": "..."} at once: the watcher's pass
#    ends, the handoff stays resume_requested (its slot held) until the session reports.
#    A session that cannot even be started -> {"failed": "...", "effect": "none"}: nothing
#    happened outside, the handoff is pending again and claimed on a later pass.
# 3. When the session ends, report back with `eventlog append` (the attempt it was given: an
#    answer of an older claim is refused): exit 0 -> verified (branch, HEAD, dirty as they are
#    now; todos already_done when the session's last line says so, else taken_over); any other
#    exit -> resume_failed, effect unknown (it started: something may have happened outside).
#
# Environment: FAILBACK_LOG, FAILBACK_ATTEMPT, FAILBACK_HEAD, FAILBACK_REPO (set by eventlog failback);
# REPO_DIR, the working tree (default: FAILBACK_REPO); CLOUD_SESSION, the shell command that runs
# the cloud session to its end (it gets HANDOFF_ID and REPO_DIR); EVENTLOG, the eventlog command
# (default: eventlog on PATH).
set -u

# A JSON string of one line of text.
json() {
    printf '"%s"' "$(printf '%s' "$1" | tr '\n\t' '  ' | sed 's/\\/\\\\/g; s/"/\\"/g')"
}

# 3. (the detached half) Run the session to its end, then put its answer into the log.
if [ "${1:-}" = --report-back ]; then
    hid=$2 attempt=$3 log=$4 repo=$5 session=$6
    out=$(HANDOFF_ID=$hid REPO_DIR=$repo sh -c "$session" 2>&1)
    code=$?
    if [ "$code" -eq 0 ]; then
        branch=$(git -C "$repo" rev-parse --abbrev-ref HEAD)
        now=$(git -C "$repo" rev-parse HEAD)
        dirty=false
        [ -n "$(git -C "$repo" status --porcelain)" ] && dirty=true
        todos=taken_over
        [ "$(printf '%s\n' "$out" | tail -n 1)" = already_done ] && todos=already_done
        event=$(printf '{"type": "verified", "handoff_id": %s, "attempt": %s, "branch": %s, "head": %s, "dirty": %s, "todos": "%s"}' \
            "$(json "$hid")" "$attempt" "$(json "$branch")" "$(json "$now")" "$dirty" "$todos")
    else
        event=$(printf '{"type": "resume_failed", "handoff_id": %s, "attempt": %s, "effect": "unknown", "error": %s}' \
            "$(json "$hid")" "$attempt" "$(json "session exit $code: $(printf '%s\n' "$out" | tail -n 1)")")
    fi
    printf '%s\n' "$event" | ${EVENTLOG:-eventlog} append "$log"
    exit
fi

hid=${1:?usage: resume_async.sh HANDOFF_ID}
attempt=${FAILBACK_ATTEMPT:?FAILBACK_ATTEMPT is not set: run me from eventlog failback}
log=${FAILBACK_LOG:?FAILBACK_LOG is not set: run me from eventlog failback}
repo=${REPO_DIR:-${FAILBACK_REPO:-}}
session=${CLOUD_SESSION:?set CLOUD_SESSION to the command that runs the cloud session}

# A session that cannot even start: nothing happened outside.
set -- $session
if ! command -v "$1" >/dev/null 2>&1; then
    printf '{"failed": %s, "effect": "none"}\n' "$(json "cannot start the session: $1 not found")"
    exit 1
fi
if [ -z "$repo" ] || ! git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
    printf '{"failed": %s, "effect": "none"}\n' "$(json "no working tree at '$repo'")"
    exit 1
fi

# 1. The tree as the session would find it: someone else's change is a conflict, nothing edited.
head=$(git -C "$repo" rev-parse HEAD)
if [ -n "${FAILBACK_HEAD:-}" ] && [ "$head" != "$(git -C "$repo" rev-parse --verify --quiet "$FAILBACK_HEAD^{commit}")" ]; then
    printf '{"conflict": %s}\n' "$(json "HEAD moved from $FAILBACK_HEAD to $head since the handoff was saved; nothing edited")"
    exit 0
fi
if [ -n "$(git -C "$repo" status --porcelain)" ]; then
    printf '{"conflict": %s}\n' "$(json "uncommitted changes in $repo by someone else; nothing edited")"
    exit 0
fi

# 2. Start the session detached (its own session where setsid exists: the watcher's timeout does
#    not reach it; its output goes to a file, not to the watcher's pipe) and answer at once.
#    It outlives the pass under the shipped units: systemd's KillMode=process leaves it running when
#    the pass ends, and no PrivateTmp keeps its trace; launchd kills only the job's own process group,
#    and the watcher ran this script in another (docs/OPERATIONS.md, "the failback unit").
trace=${TMPDIR:-/tmp}/resume-$hid-$attempt.log
if command -v setsid >/dev/null 2>&1; then detach=setsid; else detach=nohup; fi
$detach sh "$0" --report-back "$hid" "$attempt" "$log" "$repo" "$session" </dev/null >"$trace" 2>&1 &
printf '{"started": %s, "handoff_id": %s}\n' "$(json "session for $hid (attempt $attempt), pid $!, trace in $trace")" "$(json "$hid")"

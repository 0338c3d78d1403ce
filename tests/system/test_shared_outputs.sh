#!/usr/bin/env bash
# A node shared with a stranger (docs/reliability.md, "Shared nodes"): two
# unprivileged users made here in one group, a victim and an attacker,
# and a group project directory without the sticky bit.  The attacker
# plants, named like the victim's outputs, symlinks to the victim's
# thesis.tex: the trace files (SC_TRACE), the audit trail directory and its
# files (SC_AUDIT_DIR), make-dataset's output, the example trainer's
# checkpoint temporaries, shardcache-run's trace directory (job.json,
# summary.txt) and the Slurm scripts' per-job directory; and a
# launch/shardcache-run of its own in the submit directory.  An output
# directory of the victim's own under the group directory is refused too
# (it could be swapped for a link mid-job); a link to the victim's
# installation there, repointed mid-job, changes nothing; and an Open MPI
# session directory squatted in a shared $TMPDIR does not stop
# shardcache-run.  After each of the victim's runs thesis.tex is
# unchanged, the run refused with a message that names what it refused,
# and no code of the attacker's ran.  The Slurm scripts are run with bash
# as Slurm would (a copy in a spool directory, SLURM_* set, scontrol
# answering where the script was submitted from, srun a stand-in that
# runs the command once), without a Slurm.  Needs root to make the users.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}" "${SC_SOURCE_DIR:?}"
[ "$(id -u)" -eq 0 ] || skip "making the victim and attacker users needs root"
for c in useradd userdel groupadd groupdel setpriv; do
    command -v "$c" >/dev/null || skip "'$c' is missing"
done
bin=$SC_BUILD_DIR/bin

grp=scg$$ vic=scv$$ atk=sca$$
cleanup() {
    userdel "$vic" 2>/dev/null
    userdel "$atk" 2>/dev/null
    groupdel "$grp" 2>/dev/null
    rm -rf "$SC_T_TMP"
}
trap cleanup EXIT
groupadd "$grp" && useradd -M -N -g "$grp" -s /bin/bash "$vic" && useradd -M -N -g "$grp" -s /bin/bash "$atk" \
    || { failed "could not make the users"; finish; exit 1; }
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$grp" --clear-groups -- "$@"; }

t=$SC_T_TMP
chmod 755 "$t"
home=$t/home proj=$t/proj
mkdir -m 755 "$home" && chown "$vic:$grp" "$home"
mkdir -m 770 "$proj" && chown "root:$grp" "$proj" # a project directory, no sticky bit
mkdir -m 1777 "$t/sticky" # a shared directory with the sticky bit, as /tmp
mkdir -m 700 "$home/tmp" && chown "$vic:$grp" "$home/tmp"
thesis=$home/thesis.tex
as "$vic" sh -c "echo 'Chapter 1. Years of work.' >'$thesis'"
sum=$(md5sum <"$thesis")
intact() { # intact WHAT: thesis.tex has its bytes, and the victim still owns it
    [ "$(md5sum <"$thesis")" = "$sum" ] && [ "$(stat -c %U "$thesis")" = "$vic" ] \
        && pass "$1: thesis.tex unchanged" || failed "$1: thesis.tex was overwritten: $(head -c 80 "$thesis")"
}
# vrun NAME PATTERN CMD...: the victim runs CMD; it must fail saying PATTERN.
vrun() {
    local name=$1 pattern=$2
    shift 2
    expect_fail "$name: refused" "$pattern" as "$vic" env TMPDIR="$home/tmp" HOME="$home" \
        SC_CACHE_DIR="$home/cache" "$@"
    intact "$name"
}

as "$vic" "$SC_BIN" make-dataset --out "$home/data.h5" --samples 1024 --shape 3x8x8 --labels 4 \
    --seed 2 >/dev/null || { failed "make-dataset as the victim"; finish; exit 1; }
export SC_SOURCE=$home/data.h5 SC_SHARD_SIZE=64 SC_BATCH_SIZE=16
mpi=("$MPIEXEC" -n 2 --oversubscribe)

# The trace files: SC_TRACE=proj/job writes proj/job.rank<r>.json.
as "$atk" ln -s "$thesis" "$proj/job.rank0.json"
as "$atk" ln -s "$thesis" "$proj/job.rank1.json"
vrun "trace files (SC_TRACE)" "trace file.*'$proj/job.rank0.json' is a symbolic link" \
    SC_TRACE="$proj/job" "${mpi[@]}" "$bin/train" --epochs 1

# The audit trail: a directory the attacker made, with a link for rank 0.
as "$atk" mkdir -m 777 "$proj/audit"
as "$atk" ln -s "$thesis" "$proj/audit/audit-r0.bin"
vrun "audit trail directory (SC_AUDIT_DIR)" "audit trail: output directory '$proj/audit' belongs to uid" \
    SC_AUDIT_DIR="$proj/audit" "${mpi[@]}" "$bin/train" --epochs 1
# ... and the victim's own audit directory, group-writable: refused too.
as "$vic" mkdir -m 770 "$proj/vaudit"
vrun "audit trail directory others may write" "output directory '$proj/vaudit' \(mode 770\) is writable by others" \
    SC_AUDIT_DIR="$proj/vaudit" "${mpi[@]}" "$bin/train" --epochs 1

# make-dataset's output file.
as "$atk" ln -s "$thesis" "$proj/data.h5"
vrun "make-dataset --out" "'$proj/data.h5' is a symbolic link" \
    "$SC_BIN" make-dataset --out "$proj/data.h5" --samples 64 --shape 3x8x8 --labels 4

# The example trainer's checkpoint temporaries (DIR/ckpt-r<r>.bin.tmp, DIR/model.bin.tmp).
for f in ckpt-r0.bin.tmp ckpt-r1.bin.tmp model.bin.tmp; do as "$atk" ln -s "$thesis" "$proj/$f"; done
vrun "train --checkpoint temporaries" "checkpoint '$proj/ckpt-r[01].bin'.*symbolic link" \
    "${mpi[@]}" "$bin/train" --epochs 1 --checkpoint "$proj"
if python3 -c 'import torch, mpi4py' 2>/dev/null; then
    as "$atk" ln -s "$thesis" "$proj/ck.pt.tmp"
    as "$vic" env PYTHONPATH="$SC_BUILD_DIR/python" HOME="$home" TMPDIR="$home/tmp" SC_CACHE_DIR="$home/cache" \
        "${mpi[@]}" python3 "$SC_SOURCE_DIR/examples/train.py" --source "$SC_SOURCE" --epochs 1 \
        --checkpoint "$proj/ck.pt" >/dev/null 2>&1
    intact "train.py checkpoint temporary"
else
    echo "# train.py's checkpoint: not run (no torch and mpi4py here)"
fi

# shardcache-run --trace DIR, DIR made by the attacker with links for the
# merge and the summary: in the sticky directory, refused as the
# attacker's; in the group directory, refused for the directory above it.
as "$atk" mkdir -m 777 "$t/sticky/trace"
for f in job.json summary.txt; do as "$atk" ln -s "$thesis" "$t/sticky/trace/$f"; done
vrun "shardcache-run --trace" "output directory '$t/sticky/trace' belongs to uid" \
    SHARDCACHE="$SC_BIN" "$SC_SOURCE_DIR/launch/shardcache-run" -n 2 --oversubscribe --trace "$t/sticky/trace" \
    -- "$bin/train" --epochs 1
as "$atk" mkdir -m 777 "$proj/trace"
vrun "shardcache-run --trace in a group directory" "output directory '$proj/trace': others may change '$proj' \(owner root, mode 770\)" \
    SHARDCACHE="$SC_BIN" "$SC_SOURCE_DIR/launch/shardcache-run" -n 2 --oversubscribe --trace "$proj/trace" \
    -- "$bin/train" --epochs 1
# ... and a new one of the victim's there: made 0700 and accepted, the
# attacker could still rename it away mid-job and put a link to the
# victim's files in its place (the merge and the summary would follow
# it): refused at the start, nothing run.
vrun "shardcache-run --trace: the victim's new directory in the group directory" \
    "output directory '$proj/vtrace': others may change '$proj' \(owner root, mode 770\).*only you can write" \
    SHARDCACHE="$SC_BIN" "$SC_SOURCE_DIR/launch/shardcache-run" -n 1 --trace "$proj/vtrace" \
    -- touch "$home/vtrace-job-ran"
[ ! -e "$proj/vtrace" ] && [ ! -e "$home/vtrace-job-ran" ] && pass "... neither made nor the job run" \
    || failed "'$proj/vtrace' made or the job run"

# Open MPI's session directory, $TMPDIR/ompi.<host>.<uid>, made first by
# the attacker in a shared $TMPDIR: every mpirun of the victim's failed.
for h in "$(hostname)" "$(hostname -s)"; do as "$atk" mkdir -p -m 700 "$t/sticky/ompi.$h.$(id -u "$vic")"; done
expect_ok "a squatted Open MPI session directory: shardcache-run's job runs" \
    "^shardcache-run: Open MPI's session directory in the private $t/sticky/shardcache-ompi\.[^ ]+ \(removed at the end\)" \
    as "$vic" env -C "$home" -u OMPI_MCA_orte_tmpdir_base TMPDIR="$t/sticky" HOME="$home" \
    "$SC_SOURCE_DIR/launch/shardcache-run" -n 1 -- true
compgen -G "$t/sticky/shardcache-ompi.*" >/dev/null && failed "the private session directory was left behind" \
    || pass "... and its private directory removed at the end"
expect_ok "under a TMPDIR the group may rename in, the private session directory goes to /tmp" \
    "^shardcache-run: Open MPI's session directory in the private /tmp/shardcache-ompi\.[^ ]+ \(removed at the end\)" \
    as "$vic" env -C "$home" -u OMPI_MCA_orte_tmpdir_base TMPDIR="$proj" HOME="$home" \
    "$SC_SOURCE_DIR/launch/shardcache-run" -n 1 -- true

# The Slurm scripts, run as Slurm runs them: a copy in a spool directory.
# An installation of the victim's: the shipped scripts, a shardcache-run
# that says it ran, a shardcache command; in the submit directory (the
# project directory) the attacker's launch/shardcache-run.
inst=$home/inst spool=$home/spool
as "$vic" mkdir -p "$inst/launch/slurm" "$inst/build/release/bin" "$spool" "$home/fakebin"
# srun: has PMIx; runs the command once (one task, here).
as "$vic" sh -c "printf '#!/bin/sh\ncase \"\$*\" in *--mpi=list*) echo pmix; exit 0 ;; esac\nwhile [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done\nexec \"\$@\"\n' >'$home/fakebin/srun'"
as "$vic" chmod 755 "$home/fakebin/srun"
for f in ompi-env.sh ompi.env outdir.sh slurm/train.sbatch slurm/stage.sbatch slurm/array.sbatch; do
    as "$vic" cp "$SC_SOURCE_DIR/launch/$f" "$inst/launch/$f"
done
as "$vic" sh -c "printf '#!/bin/sh\necho \"the installed shardcache-run ran\"\n' >'$inst/launch/shardcache-run'"
as "$vic" sh -c ": >'$inst/build/release/bin/shardcache'; : >'$inst/build/release/bin/train'"
as "$vic" chmod 755 "$inst/launch/shardcache-run" "$inst/build/release/bin/shardcache" "$inst/build/release/bin/train"
as "$atk" mkdir -p "$proj/launch"
as "$atk" sh -c "printf '#!/bin/sh\necho \"the attacker ran\" >>\"$thesis\"; echo \"the attacker ran\"\n' >'$proj/launch/shardcache-run'"
as "$atk" chmod 755 "$proj/launch/shardcache-run"
# scontrol: where Slurm says the job's script was submitted from (SCONTROL_COMMAND).
as "$vic" sh -c "printf '#!/bin/sh\n[ -n \"\$SCONTROL_COMMAND\" ] && echo \"   Command=\$SCONTROL_COMMAND\"\n' >'$home/fakebin/scontrol'"
as "$vic" chmod 755 "$home/fakebin/scontrol"
# sbatch_run SCRIPT JOBID [VAR=VALUE...]: the victim's job SCRIPT, run from the spool.
sbatch_run() {
    local s=$1 id=$2
    shift 2
    as "$vic" cp "$inst/launch/slurm/$s" "$spool/slurm_script"
    (cd "$proj" && as "$vic" env -u SHARDCACHE_HOME -u SHARDCACHE_BIN PATH="$home/fakebin:$PATH" \
        HOME="$home" SLURM_JOB_ID="$id" SLURM_ARRAY_JOB_ID="$id" SLURM_ARRAY_TASK_ID=0 SLURM_SUBMIT_DIR="$proj" \
        SLURM_JOB_NODELIST=n1 SLURM_NTASKS=1 SLURM_JOB_NUM_NODES=1 \
        SCONTROL_COMMAND="$inst/launch/slurm/$s" "$@" bash "$spool/slurm_script")
}
for s in train.sbatch stage.sbatch array.sbatch; do
    out=$(sbatch_run "$s" 1$RANDOM OUT="$home/out-$s" 2>&1)
    grep -q "the installed shardcache-run ran" <<<"$out" && ! grep -q "attacker" <<<"$out" \
        && pass "$s: runs the installation it was submitted from, not the submit directory's" \
        || { failed "$s: ran the wrong shardcache-run"; echo "$out" | tail -5; }
done
out=$(sbatch_run train.sbatch 1$RANDOM SCONTROL_COMMAND= 2>&1)
grep -q "cannot tell where shardcache is" <<<"$out" && ! grep -Eq "shardcache-run ran|attacker ran" <<<"$out" \
    && pass "no installation found: refused, nothing run" || { failed "no installation: $out"; }
as "$vic" chmod g+w "$inst/launch"
out=$(sbatch_run train.sbatch 1$RANDOM OUT="$home/out-gw" 2>&1)
grep -q "not running $inst: others may change '$inst/launch' (owner $vic, mode 775)" <<<"$out" \
    && ! grep -Eq "shardcache-run ran|attacker ran" <<<"$out" && pass "an installation others may write: refused, nothing run" \
    || failed "group-writable installation: $out"
as "$vic" chmod g-w "$inst/launch"
# The per-job directory $SLURM_SUBMIT_DIR/shardcache-<job id>: in a
# sticky submit directory, made first by the attacker; in the group
# directory (where it could be swapped mid-job), refused whoever made it.
as "$atk" mkdir -m 777 "$t/sticky/shardcache-4242"
as "$atk" ln -s "$thesis" "$t/sticky/shardcache-4242/trace"
out=$(sbatch_run train.sbatch 4242 SLURM_SUBMIT_DIR="$t/sticky" 2>&1)
grep -q "output directory '$t/sticky/shardcache-4242' exists already" <<<"$out" && ! grep -Eq "shardcache-run ran|attacker ran" <<<"$out" \
    && pass "train.sbatch: a per-job directory made by another user refused" || failed "per-job directory: $out"
out=$(sbatch_run train.sbatch 4343 SLURM_SUBMIT_DIR="$t/sticky" 2>&1)
[ "$(stat -c '%U %a' "$t/sticky/shardcache-4343")" = "$vic 700" ] && pass "train.sbatch: the per-job directory is the victim's, 0700" \
    || failed "per-job directory: $(stat -c '%U %a' "$t/sticky/shardcache-4343" 2>&1)"
for s in train.sbatch array.sbatch; do
    out=$(sbatch_run "$s" 4444 2>&1)
    grep -q "output directory '$proj/shardcache-[-a-z0-9]*4444[-a-z0-9]*': others may change '$proj' (owner root, mode 770)" <<<"$out" \
        && ! grep -Eq "shardcache-run ran|attacker ran" <<<"$out" && ! compgen -G "$proj/shardcache-*4444*" >/dev/null \
        && pass "$s: no per-job directory in a group directory without the sticky bit" || failed "$s in the group directory: $out"
done

# SHARDCACHE_HOME a link in the group directory to the victim's own
# installation (the real scripts, a shardcache that says it ran): checked
# as its target, then repointed to the attacker's installation while the
# trainer runs (the trainer makes the swap here, for the timing); the
# trace merge after it must run the installation that was checked.
inst2=$home/inst2
as "$vic" mkdir -p "$inst2/launch/slurm" "$inst2/build/release/bin"
for f in shardcache-run ompi-env.sh ompi.env outdir.sh slurm/train.sbatch; do
    as "$vic" cp "$SC_SOURCE_DIR/launch/$f" "$inst2/launch/$f"
done
as "$vic" sh -c "printf '#!/bin/sh\necho \"the installed shardcache ran: \$1 \$2\"\n' >'$inst2/build/release/bin/shardcache'"
as "$vic" sh -c "printf '#!/bin/sh\nln -sfn \"$proj/evil\" \"$proj/sc\" && echo \"trainer: swapped\"\n' >'$inst2/build/release/bin/train'"
as "$vic" chmod 755 "$inst2/build/release/bin/shardcache" "$inst2/build/release/bin/train"
as "$atk" mkdir -p "$proj/evil/launch" "$proj/evil/build/release/bin"
for f in launch/shardcache-run build/release/bin/shardcache build/release/bin/train; do
    as "$atk" sh -c "printf '#!/bin/sh\necho \"the attacker ran\" >>\"$thesis\"; echo \"the attacker ran\"\n' >'$proj/evil/$f'"
    as "$atk" chmod 755 "$proj/evil/$f"
done
as "$vic" ln -s "$inst2" "$proj/sc"
out=$(sbatch_run train.sbatch 5151 SHARDCACHE_HOME="$proj/sc" OUT="$home/out-5151" 2>&1)
grep -q "trainer: swapped" <<<"$out" && grep -q "the installed shardcache ran: trace merge" <<<"$out" \
    && ! grep -q "attacker ran" <<<"$out" \
    && pass "SHARDCACHE_HOME a link repointed mid-job: the checked installation runs to the end" \
    || { failed "SHARDCACHE_HOME repointed mid-job"; echo "$out" | tail -8; }
intact "Slurm scripts"
finish

#!/usr/bin/env bash
# The README's set-up path: a user who is not root and lacks a package is
# told the exact install line, and nothing runs; root would install it.
. "$(dirname "$0")/lib.sh"
: "${SC_SOURCE_DIR:?}"
# A copy anyone can read: the checkout may sit under a private home.
chmod 755 "$SC_T_TMP"
cp "$SC_SOURCE_DIR/scripts/lib.sh" "$SC_T_TMP/lib.sh"
chmod 644 "$SC_T_TMP/lib.sh"
lib=$SC_T_TMP/lib.sh
expect_ok "nothing to do when all is installed" "^ready$" \
    bash -c ". '$lib' && sc_ensure_packages bash coreutils && echo ready"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
else
    as_user=()
fi
if [ "$(id -u)" -ne 0 ] || [ ${#as_user[@]} -gt 0 ]; then
    expect_fail "not root: prints the exact install line" \
        "sudo apt-get update && sudo apt-get install -y no-such-package-sc" \
        "${as_user[@]}" bash -c ". '$lib' && sc_ensure_packages bash no-such-package-sc && echo ran"
    out=$("${as_user[@]}" bash -c ". '$lib' && sc_ensure_packages no-such-package-sc && echo ran" 2>&1)
    grep -q "^ran$" <<<"$out" && failed "continued after a missing package" || pass "and stops"
else
    failed "cannot drop root to test the non-root path (no setpriv)"
fi
# CI runs what the README tells a user to run: .ci/run, started as CI starts
# it (from a checkout's root, with no arguments), runs the README's test
# command from that root, and ends with its status.  A stand-in for the
# command, in a copy of .ci/run's tree, says where it ran.
cmd=$(sed -n 's|^\(\./scripts/[a-z]*\) *# .*run every test$|\1|p' "$SC_SOURCE_DIR/README.md")
if [ -n "$cmd" ] && [ -x "$SC_SOURCE_DIR/$cmd" ]; then
    pass "the README's test command ($cmd) is in the repository"
else
    failed "the README names no test command, or '$cmd' is not an executable file"
fi
ci=$SC_T_TMP/ci
mkdir -p "$ci/.ci" "$(dirname "$ci/${cmd:-none}")"
cp "$SC_SOURCE_DIR/.ci/run" "$ci/.ci/run"
printf '#!/usr/bin/env bash\necho "ran %s in $PWD with [$*]"\nexit 3\n' "$cmd" >"$ci/${cmd:-none}"
chmod +x "$ci/${cmd:-none}"
out=$(cd "$ci" && ./.ci/run 2>&1); rc=$?
[ "$out" = "ran $cmd in $ci with []" ] && pass ".ci/run runs $cmd from the checkout's root" \
    || failed ".ci/run does not run the README's test command: '$out'"
[ "$rc" -eq 3 ] && pass ".ci/run ends with the tests' status" \
    || failed ".ci/run ended with $rc, the tests with 3"
finish

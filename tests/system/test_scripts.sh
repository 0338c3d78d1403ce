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
expect_ok ".ci/run is the README's test command" "^exec \./scripts/test$" cat "$SC_SOURCE_DIR/.ci/run"
finish

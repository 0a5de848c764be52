# Shared by the setup scripts: sourced, not run.

# The package names of list file $1 (scripts/packages/*): the first word of
# each line, comments and blank lines left out.
package_list() {
    sed -e 's/#.*//' "$1" | awk 'NF { print $1 }'
}

# Installs those of the Debian packages "$@" that are not installed yet
# (apt-get, with sudo unless root). Idempotent: nothing runs when all are.
apt_install_missing() {
    local missing=() p
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
            missing+=("$p")
        fi
    done
    if ((${#missing[@]} == 0)); then
        return
    fi
    local sudo=()
    if [ "$(id -u)" != 0 ]; then sudo=(sudo); fi
    echo "setup: installing ${missing[*]}"
    # Waits for another apt (an unattended upgrade, a second setup) instead
    # of failing on its lock.
    local wait=(-o DPkg::Lock::Timeout=600)
    "${sudo[@]}" apt-get "${wait[@]}" update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" install -y -q --no-install-recommends "${missing[@]}"
}

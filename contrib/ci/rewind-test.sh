#!/bin/sh
# The CI step of docs/ci.md (GitHub Actions and GitLab CI run it as is):
# runs a test binary under `rewind test`, so that a failure in any schedule
# it tries leaves the failing run in $REWIND_ARTIFACTS (default
# rewind-artifacts) as a replayable .rwd, with RUN.txt: a one-line summary
# and the commands that open it. A passing test leaves nothing.
#
#   contrib/ci/rewind-test.sh TEST-BINARY [ARGS]...
#
# REWIND_OPTIONS adds options of `rewind check` (word-split), like
# "--points memory".
# Exit status: the test's (0 passed, 1 failed in some schedule, 2 trouble).
set -u
# shellcheck disable=SC2086
exec rewind test --schedules "${REWIND_SCHEDULES:-64}" ${REWIND_OPTIONS:-} \
    --artifacts "${REWIND_ARTIFACTS:-rewind-artifacts}" -- "$@"

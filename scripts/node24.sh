#!/usr/bin/env bash
# Prints the path of a Node 24 binary, installing one when missing: kept for
# the commands that name it; scripts/node.sh 24 does the work (see there).
exec bash "$(dirname "$0")/node.sh" 24

#!/usr/bin/env bash
# Lists every `pub struct|enum|const|type` the protocol crate defines and fails when a struct,
# enum, const or type of the same name is defined (not re-exported) in another crate's sources
# (discovery, server, agent, client, robota, loadgen, the CLI): the wire has one owner. The
# compiler cannot say it: a twin compiles. An associated type of a trait impl (`type Response
# = …;` of tower's Service) is a name the trait chose, not a definition.
set -euo pipefail
cd "$(dirname "$0")/.."
names=$(grep -rhoE '^\s*pub (struct|enum|const|type) [A-Za-z_][A-Za-z0-9_]*' protocol/src \
  | awk '$3 != "fn" {print $3}' | sort -u)
twins=0
for name in $names; do
  if hits=$(grep -rnE "^\s*(pub(\([a-z]+\))? )?(struct|enum|const|type) ${name}\b" \
      discovery/src server/src agent/src client/src robota/src loadgen/src cli/src \
      | grep -vE ":\s+type ${name} = "); then
    echo "twin of protocol's ${name}:"; echo "${hits}"; twins=$((twins + 1))
  fi
done
echo "$(echo "$names" | wc -w) protocol names checked, ${twins} with a twin"
[ "$twins" -eq 0 ]

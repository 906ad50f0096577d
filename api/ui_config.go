package api

// ConfigState is what the status page shows of one reloaded configuration
// of the node (its policy file, its RLS config): where it comes from, what
// is in force, and how its last load went.
type ConfigState struct {
	// Name says which configuration: "policies" or "rls".
	Name string `json:"name"`
	// Source is where it is loaded from (a file or directory), "" for
	// none.
	Source string `json:"source"`
	// Hash identifies what is in force (policy.Set.Hash; the RLS files'
	// digest).
	Hash string `json:"hash"`
	// Rules counts the policies, or the RLS rules.
	Rules int `json:"rules"`
	// LastLoad is when it was last loaded, applied or refused (RFC 3339,
	// UTC), "" if never; a reload of unchanged files is not counted.
	LastLoad string `json:"last_load"`
	// LastResult is "loaded" (at start), "applied", or "rejected: " and
	// why, the one in force kept; "" if never loaded.
	LastResult string `json:"last_result"`
}

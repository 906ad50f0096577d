package wire

// KeyInfoJSON is a key's state as the HTTP admin routes answer it and as
// `sluice inspect --json` prints it: one shape for both.
type KeyInfoJSON struct {
	Key        string `json:"key"`
	Owner      string `json:"owner"`
	Policy     string `json:"policy,omitempty"`
	Algorithm  string `json:"algorithm"`
	Limit      int64  `json:"limit"`
	Remaining  int64  `json:"remaining"`
	Used       int64  `json:"used"`
	ResetAfter string `json:"reset_after"`
	// ResetAt and WindowStart are RFC 3339 times (UTC).
	ResetAt       string          `json:"reset_at,omitempty"`
	WindowStart   string          `json:"window_start,omitempty"`
	Exists        bool            `json:"exists"`
	Grants        int             `json:"grants"`
	GrantedTokens int64           `json:"granted_tokens"`
	LeaseCount    int             `json:"lease_count"`
	Leases        []LeaseInfoJSON `json:"leases,omitempty"`
	Reservations  int             `json:"reservations"`
	ReservedUnits int64           `json:"reserved_units"`
	DebtUnits     int64           `json:"debt_units"`
}

// LeaseInfoJSON is one live lease in a KeyInfoJSON.
type LeaseInfoJSON struct {
	Cost         int64  `json:"cost"`
	ExpiresAfter string `json:"expires_after"`
	Bound        bool   `json:"bound"`
}

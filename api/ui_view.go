package api

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// uiData is what the status page shows; /ui/data answers it as JSON.
type uiData struct {
	Node string `json:"node"`
	// Insecure: the cluster runs without authentication (--insecure).
	Insecure bool       `json:"insecure"`
	Members  []uiMember `json:"members"`
	// RingShareTotal sums the members' shares (1 when the ring is whole).
	RingShareTotal float64 `json:"ring_share_total"`
	// Configs are the node's reloaded configurations.
	Configs []ConfigState `json:"configs"`

	IntervalSeconds float64 `json:"interval_seconds"`
	Window          string  `json:"window"`
	// Span and NowSpan are what the Window and Now rates average over:
	// less than asked while the node has not been up that long.
	Span    string `json:"span"`
	NowSpan string `json:"now_span"`
	// Rates are per second, one per interval of the window, oldest first.
	Rates []uiRate `json:"rates"`
	// Now* average the last uiNowSpan of the window; Window* all of it.
	NowChecks     float64 `json:"checks_per_second"`
	NowDenials    float64 `json:"denials_per_second"`
	WindowChecks  float64 `json:"window_checks_per_second"`
	WindowDenials float64 `json:"window_denials_per_second"`
	PeakChecks    float64 `json:"window_peak_checks_per_second"`

	HotKeys []uiHotKey `json:"hot_keys"`
	// KeysShown: the keys' strings are given (else only their hashes).
	KeysShown bool `json:"keys_shown"`
	// HotSpan: the hot keys cover the last HotSpan to twice that (two
	// generations of the sketch).
	HotSpan string `json:"hot_keys_span"`
	// SampleEvery: the sketch counts 1 check in SampleEvery, weighing it
	// SampleEvery; Counted is the weight counted in the span.
	SampleEvery int    `json:"sample_every"`
	Counted     uint64 `json:"counted_checks"`
	Capacity    int    `json:"sketch_counters"`

	Chart uiChart `json:"-"`
}

type uiMember struct {
	Name      string  `json:"name"`
	State     string  `json:"state"`
	RingShare float64 `json:"ring_share"`
	GRPCAddr  string  `json:"grpc_addr"`
	Version   string  `json:"version"`
	// PolicyHash and RLSHash are the member's gossiped hashes; the
	// Differs flags mark those unlike this node's.
	PolicyHash    string `json:"policy_hash,omitempty"`
	RLSHash       string `json:"rls_hash,omitempty"`
	PolicyDiffers bool   `json:"policy_differs,omitempty"`
	RLSDiffers    bool   `json:"rls_differs,omitempty"`
	Self          bool   `json:"self"`
}

type uiRate struct {
	Checks  float64 `json:"checks"`
	Denials float64 `json:"denials"`
}

type uiHotKey struct {
	Key    string `json:"key,omitempty"`
	Hash   string `json:"hash"`
	Policy string `json:"policy,omitempty"`
	// Estimate is the counted checks; the true count lies in
	// [Estimate-MaxOvercount, Estimate], up to sampling.
	Estimate     uint64  `json:"estimate"`
	MaxOvercount uint64  `json:"max_overcount"`
	Share        float64 `json:"share"`
}

// uiChart is the rates as SVG bars, computed here so the template only
// places numbers: a plot of Width × Height (bars in its coordinates) at
// (Left, Top) in a picture of OuterWidth × OuterHeight, with the axes'
// ticks and labels around it.
type uiChart struct {
	Width, Height           int
	Left, Top               int
	OuterWidth, OuterHeight int
	// TickEnd is where the time axis's ticks end, MidY the middle of the
	// checks/s axis.
	TickEnd, MidY int
	Bars          []uiBar
	// YTicks are checks/s (0, half the peak, the peak), XTicks time ago
	// (the window's start to "now"), each at its place in the plot.
	YTicks, XTicks []uiTick
}

// uiTick is one axis tick: its place along the axis and its label.
type uiTick struct {
	At, Label string
}

type uiBar struct {
	X, W, CheckY, CheckH, DenyY, DenyH string
}

// uiNowSpan is the span of the "now" rates.
const uiNowSpan = 10 * time.Second

// view builds the page's data.
func (c *UIConfig) view(q uiQuery, showKeys bool) *uiData {
	act := c.Activity
	d := &uiData{Node: c.Self, Insecure: c.Insecure, IntervalSeconds: act.Interval.Seconds(),
		Window: (time.Duration(q.slots) * act.Interval).String(), KeysShown: showKeys,
		SampleEvery: act.Hot.SampleEvery(), Capacity: act.Hot.Capacity(),
		HotSpan: (time.Duration(act.Generation) * act.Interval).String()}
	members := c.Members()
	var self MemberInfo
	for _, m := range members {
		if m.Name == c.Self {
			self = m
		}
	}
	differs := func(h, local string) bool { return h != "" && local != "" && h != local }
	for _, m := range members {
		d.Members = append(d.Members, uiMember{Name: m.Name, State: m.State, RingShare: m.RingShare,
			GRPCAddr: m.GRPCAddr, Version: m.Version, Self: m.Name == c.Self,
			PolicyHash: m.PolicyHash, RLSHash: m.RLSHash,
			PolicyDiffers: differs(m.PolicyHash, self.PolicyHash), RLSDiffers: differs(m.RLSHash, self.RLSHash)})
		d.RingShareTotal += m.RingShare
	}
	slices.SortFunc(d.Members, func(a, b uiMember) int { return cmp.Compare(a.Name, b.Name) })
	d.Configs = []ConfigState{}
	if c.Configs != nil {
		d.Configs = c.Configs()
	}

	secs := act.Interval.Seconds()
	pts := act.Series.Last(q.slots)
	d.Rates = make([]uiRate, len(pts))
	nowFrom := len(pts) - max(int(uiNowSpan/act.Interval), 1)
	var nowC, nowD, allC, allD float64
	for i, p := range pts {
		r := uiRate{Checks: float64(p.Checks) / secs, Denials: float64(p.Denials) / secs}
		d.Rates[i] = r
		allC, allD = allC+r.Checks, allD+r.Denials
		if i >= nowFrom {
			nowC, nowD = nowC+r.Checks, nowD+r.Denials
		}
		d.PeakChecks = max(d.PeakChecks, r.Checks)
	}
	n := len(pts)
	k := min(n, n-nowFrom)
	d.Span, d.NowSpan = (time.Duration(n) * act.Interval).String(), (time.Duration(k) * act.Interval).String()
	if n > 0 {
		d.WindowChecks, d.WindowDenials = allC/float64(n), allD/float64(n)
		d.NowChecks, d.NowDenials = nowC/float64(k), nowD/float64(k)
	}
	d.Chart = chart(d.Rates, q.slots, d.PeakChecks, act.Interval)

	top, total := act.Hot.Top(q.top)
	d.Counted = total
	d.HotKeys = make([]uiHotKey, len(top))
	for i, ctr := range top {
		h := uiHotKey{Hash: fmt.Sprintf("%016x", ctr.Hash), Policy: ctr.Policy, Estimate: ctr.Count, MaxOvercount: ctr.Err}
		if showKeys {
			h.Key = ctr.Key
		}
		if total > 0 {
			h.Share = float64(ctr.Count) / float64(total)
		}
		d.HotKeys[i] = h
	}
	return d
}

// chart lays out rates as bars in a window of slots of interval each, the
// newest at the right; peak is the tallest bar.
func chart(rates []uiRate, slots int, peak float64, interval time.Duration) uiChart {
	c := uiChart{Width: 600, Height: 120, Left: 64, Top: 10}
	c.OuterWidth, c.OuterHeight = c.Left+c.Width+24, c.Top+c.Height+40
	c.TickEnd, c.MidY = c.Height+4, c.Height/2
	if peak <= 0 {
		peak = 1
	}
	w := float64(c.Width) / float64(max(slots, 1))
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	for _, share := range []float64{0, 0.5, 1} {
		c.YTicks = append(c.YTicks, uiTick{At: f(float64(c.Height) * (1 - share)), Label: strconv.FormatFloat(peak*share, 'f', 1, 64)})
	}
	window := time.Duration(max(slots, 1)) * interval
	for _, share := range []float64{0, 0.25, 0.5, 0.75, 1} {
		label := "now"
		if ago := time.Duration(float64(window) * (1 - share)).Round(interval); ago > 0 {
			label = "-" + ago.String()
		}
		c.XTicks = append(c.XTicks, uiTick{At: f(float64(c.Width) * share), Label: label})
	}
	off := slots - len(rates)
	for i, r := range rates {
		hc := r.Checks / peak * float64(c.Height)
		hd := r.Denials / peak * float64(c.Height)
		c.Bars = append(c.Bars, uiBar{X: f(float64(off+i) * w), W: f(max(w, 0.5)),
			CheckY: f(float64(c.Height) - hc), CheckH: f(hc), DenyY: f(float64(c.Height) - hd), DenyH: f(hd)})
	}
	return c
}

package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// systemColor is each system's line colour in the plot.
var systemColor = map[string]color.Color{
	"sluice":          color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"sluice1":         color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	"sluice-nogrants": color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	"sluice-owner":    color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	"redis":           color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"echo":            color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	"ratelimit":       color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"gubernator":      color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// percentileTicks are the x axis's ticks: 1/(1-p) at 50%, 90%, ... 99.999%.
var percentileTicks = []struct {
	x     float64
	label string
}{{2, "50%"}, {10, "90%"}, {100, "99%"}, {1e3, "99.9%"}, {1e4, "99.99%"}, {1e5, "99.999%"}}

// xTicker labels the HDR-style percentile axis.
type xTicker struct{}

func (xTicker) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for _, t := range percentileTicks {
		if t.x >= lo*0.999 && t.x <= hi*1.001 {
			ts = append(ts, plot.Tick{Value: t.x, Label: t.label})
		}
	}
	return ts
}

// yTicker labels a log latency axis at 1, 2, 5 × powers of ten.
type yTicker struct{}

func (yTicker) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < lo*0.999 || v > hi*1.001 {
				continue
			}
			label := ""
			if m == 1 || hi/lo < 100 {
				label = fmt.Sprintf("%g", v)
			}
			ts = append(ts, plot.Tick{Value: v, Label: label})
		}
	}
	return ts
}

// percentileXY turns a run's percentile points into (1/(1-p), latency ms).
// The engine's percentiles may be fractions or percents; p = 100% is
// dropped (it has no place on the axis).
func percentileXY(r *Result) plotter.XYs {
	if !r.ok() || len(r.Summary.Percentiles) == 0 {
		return nil
	}
	scale := 1.0
	for _, p := range r.Summary.Percentiles {
		if p.Percentile > 1 {
			scale = 100
			break
		}
	}
	var xys plotter.XYs
	for _, p := range r.Summary.Percentiles {
		q := p.Percentile / scale
		if q < 0.5 || q >= 1 || 1/(1-q) > 1e6 {
			continue
		}
		ms := float64(p.Latency) / float64(time.Millisecond)
		ms = math.Max(ms, 0.001)
		xys = append(xys, plotter.XY{X: 1 / (1 - q), Y: ms})
	}
	return xys
}

// latencyPlot is one scenario's tile.
func latencyPlot(rep *Report, sc ScenarioInfo) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("(%s) %s", sc.ID, sc.Short)
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (ms)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = xTicker{}, yTicker{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = 2*vg.Millimeter, -2*vg.Millimeter
	p.Add(plotter.NewGrid())
	xmax, ymin, ymax := 1e3, math.Inf(1), math.Inf(-1)
	for _, sys := range rep.Systems {
		xys := percentileXY(rep.result(sc.ID, sys))
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = systemColor[sys]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(systemName(sys), l)
		for _, xy := range xys {
			xmax = math.Max(xmax, xy.X)
			ymin = math.Min(ymin, xy.Y)
			ymax = math.Max(ymax, xy.Y)
		}
	}
	if math.IsInf(ymin, 0) {
		ymin, ymax = 0.01, 10
	}
	p.X.Min, p.X.Max = 2, xmax
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(ymin)))
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(ymax*1.5)))
	return p, nil
}

// latencySVG draws one tile per scenario of a-d (2 × 2 for 3 or 4).
func latencySVG(rep *Report) ([]byte, error) {
	var plots []*plot.Plot
	for _, sc := range rep.Scenarios {
		p, err := latencyPlot(rep, sc)
		if err != nil {
			return nil, err
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return nil, fmt.Errorf("no scenario to plot")
	}
	cols := min(2, len(plots))
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, p := range plots {
		grid[i/cols][i%cols] = p
	}
	w, h := vg.Length(cols)*5.5*vg.Inch, vg.Length(rows)*4*vg.Inch
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 10, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 8}
	canvases := plot.Align(grid, tiles, dc)
	for j := range grid {
		for i, p := range grid[j] {
			if p != nil {
				p.Draw(canvases[j][i])
			}
		}
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeLatencySVG(path string, rep *Report) error {
	b, err := latencySVG(rep)
	if err != nil {
		return err
	}
	return writeFile(path, b)
}

package main

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// spreadXYs are medians with their min-max, for lines and error bars.
type spreadXYs struct {
	x, y, lo, hi []float64
}

func (s *spreadXYs) Len() int                    { return len(s.x) }
func (s *spreadXYs) XY(i int) (float64, float64) { return s.x[i], s.y[i] }
func (s *spreadXYs) YError(i int) (float64, float64) {
	return s.y[i] - s.lo[i], s.hi[i] - s.y[i]
}

// Plot draws payload throughput against message size, log-log, one line
// per system (the shape of the NetIO paper's figure 6), with min-max bars.
func (r *report) Plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("One-way throughput on loopback, sender and receiver in separate processes (%s)", r.Date.Format("2006-01-02"))
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text = "message size (payload bytes)"
	p.Y.Label.Text = "throughput (payload Gbit/s, log scale)"
	p.X.Label.TextStyle.Font.Size = vg.Points(12)
	p.Y.Label.TextStyle.Font.Size = vg.Points(12)
	p.X.Tick.Label.Font.Size = vg.Points(11)
	p.Y.Tick.Label.Font.Size = vg.Points(11)
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}

	var xt []plot.Tick
	for _, s := range r.Sizes {
		xt = append(xt, plot.Tick{Value: float64(s), Label: sizeLabel(s)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(xt)
	if len(r.Sizes) > 0 {
		p.X.Min, p.X.Max = float64(r.Sizes[0])/1.4, float64(r.Sizes[len(r.Sizes)-1])*1.4
	}

	lo, hi := math.Inf(1), math.Inf(-1)
	for i, m := range modesIn(streamModes, r.Stream) {
		xys := &spreadXYs{}
		for _, s := range r.Sizes {
			pt := r.streamPoint(m.name, s)
			if pt == nil {
				continue
			}
			g := pt.gbps()
			if g.N == 0 || g.Min <= 0 {
				continue
			}
			xys.x = append(xys.x, float64(s))
			xys.y = append(xys.y, g.Median)
			xys.lo = append(xys.lo, g.Min)
			xys.hi = append(xys.hi, g.Max)
			lo, hi = math.Min(lo, g.Min), math.Max(hi, g.Max)
		}
		if xys.Len() == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		c := lineColor(i)
		line.Color = c
		line.Width = vg.Points(1.6)
		line.Dashes = plotutil.Dashes(i)
		if i == 0 {
			line.Width = vg.Points(2.8) // netio stands out
		}
		points.Shape = plotutil.Shape(i)
		points.Color = c
		points.Radius = vg.Points(3.5)
		bars, err := plotter.NewYErrorBars(xys)
		if err != nil {
			return nil, err
		}
		bars.Color = c
		bars.Width = vg.Points(1)
		p.Add(line, points, bars)
		p.Legend.Add(m.label, line, points)
	}
	if !math.IsInf(lo, 0) {
		p.Y.Min, p.Y.Max = lo/2, hi*2.5
		p.Y.Tick.Marker = decadeTicks{}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(-8)
	p.Legend.TextStyle.Font.Size = vg.Points(11)
	p.Legend.ThumbnailWidth = vg.Points(36)
	return p, nil
}

// lineColor is a palette readable on white and by most colour-blind
// readers (Okabe-Ito), netio in black.
func lineColor(i int) color.Color {
	pal := []color.RGBA{
		{0, 0, 0, 255},       // netio
		{230, 159, 0, 255},   // orange
		{213, 94, 0, 255},    // vermillion
		{0, 114, 178, 255},   // blue
		{86, 180, 233, 255},  // sky blue
		{0, 158, 115, 255},   // green
		{204, 121, 167, 255}, // purple
	}
	return pal[i%len(pal)]
}

// decadeTicks labels 1, 2 and 5 times each power of ten.
type decadeTicks struct{}

func (decadeTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < min || v > max {
				continue
			}
			ts = append(ts, plot.Tick{Value: v, Label: trimG(v)})
		}
		for m := 3.0; m < 10; m++ {
			if v := m * math.Pow(10, e); v >= min && v <= max && m != 5 {
				ts = append(ts, plot.Tick{Value: v}) // minor
			}
		}
	}
	return ts
}

// SavePlot writes the figure; the extension picks the format (svg, png).
func (r *report) SavePlot(path string) error {
	p, err := r.Plot()
	if err != nil {
		return err
	}
	return p.Save(11*vg.Inch, 7*vg.Inch, path)
}


package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
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
// The legend entries come back separately, to go under the axes where
// they cover no data.
func (r *report) Plot() (*plot.Plot, []legendEntry, error) {
	var legend []legendEntry
	p := plot.New()
	p.Title.Text = fmt.Sprintf("One-way throughput against message size (log-log), loopback, sender and receiver in separate processes, %s", r.Date.Format("2006-01-02"))
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text = "message size (payload bytes), log scale"
	p.Y.Label.Text = "payload Gbit/s"
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
	for _, m := range modesIn(streamModes, r.Stream) {
		i := slices.Index(streamModes, m) // the same look in every figure
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
			return nil, nil, err
		}
		c := lineColor(i)
		line.Color = c
		line.Width = vg.Points(1.6)
		line.Dashes = plotutil.Dashes(i)
		if strings.HasPrefix(m.name, "netio") {
			line.Width = vg.Points(2.8) // netio stands out
		}
		points.Shape = plotutil.Shape(i)
		points.Color = c
		points.Radius = vg.Points(3.5)
		bars, err := plotter.NewYErrorBars(xys)
		if err != nil {
			return nil, nil, err
		}
		bars.Color = c
		bars.Width = vg.Points(1)
		p.Add(line, points, bars)
		legend = append(legend, legendEntry{m.label, []plot.Thumbnailer{line, points}})
	}
	if !math.IsInf(lo, 0) {
		p.Y.Min, p.Y.Max = lo/2, hi*2.5
		p.Y.Tick.Marker = decadeTicks{}
	}
	p.Add(plotter.NewGrid())
	return p, legend, nil
}

type legendEntry struct {
	label  string
	thumbs []plot.Thumbnailer
}

// lineColor is a palette readable on white and by most colour-blind
// readers (Okabe-Ito and a grey), netio LL in black, netio HT in blue.
func lineColor(i int) color.Color {
	pal := []color.RGBA{
		{0, 0, 0, 255},       // netio LL
		{0, 114, 178, 255},   // netio HT: blue
		{0, 45, 95, 255},     // netio HT, NextBatch: navy
		{230, 159, 0, 255},   // orange
		{213, 94, 0, 255},    // vermillion
		{120, 120, 120, 255}, // grey
		{86, 180, 233, 255},  // sky blue
		{0, 158, 115, 255},   // green
		{204, 121, 167, 255}, // purple
		{200, 30, 30, 255},   // netio on shm, LL: red
		{120, 0, 0, 255},     // netio on shm, HT: dark red
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
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
		for m := 3.0; m < 10; m++ {
			if v := m * math.Pow(10, e); v >= min && v <= max && m != 5 {
				ts = append(ts, plot.Tick{Value: v}) // minor
			}
		}
	}
	return ts
}

// SavePlot writes the figure; the extension picks the format (.svg or .png).
func (r *report) SavePlot(path string) error {
	p, entries, err := r.Plot()
	if err != nil {
		return err
	}
	const perColumn = 3
	rows := (len(entries) + 1) / 2
	rows = max(rows, perColumn)
	w, h := 11*vg.Inch, 7.5*vg.Inch
	legendH := vg.Points(float64(rows)*19 + 8)

	var canvas vg.CanvasWriterTo
	switch filepath.Ext(path) {
	case ".svg":
		canvas = vgsvg.New(w, h)
	case ".png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(144))}
	default:
		return fmt.Errorf("plot: unknown format %q", path)
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	area := dc
	area.Min.Y += legendH
	area.Max.X -= vg.Points(14)
	area.Max.Y -= vg.Points(8)
	p.Draw(area)

	// Two columns of legend entries under the x axis label.
	half := rows
	for col := 0; col*half < len(entries); col++ {
		l := plot.NewLegend()
		l.Top, l.Left = true, true
		l.TextStyle.Font.Size = vg.Points(11)
		l.ThumbnailWidth = vg.Points(40)
		l.Padding = vg.Points(5)
		for _, e := range entries[col*half : min(len(entries), (col+1)*half)] {
			l.Add(e.label, e.thumbs...)
		}
		c := dc
		c.Max.Y = dc.Min.Y + legendH - vg.Points(6)
		c.Min.X = dc.Min.X + vg.Points(60) + vg.Length(col)*(dc.Max.X-dc.Min.X)/2
		c.Max.X = c.Min.X + (dc.Max.X-dc.Min.X)/2 - vg.Points(60)
		l.Draw(c)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

package httpapi

import (
	_ "embed"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/limitnode/limitnode/api/wire"
)

// The status page, GET /: one HTML page built into the binary, readable
// without JavaScript (a little reloads it every 5 seconds), with no request
// to anything but this node. It shows what GET /v1/stats answers.

//go:embed statuspage.html
var statusPageHTML string

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"deref":  func(b *bool) bool { return b != nil && *b },
	"unixMS": func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) },
}).Parse(statusPageHTML))

// statusPageCSP allows the page's own inline style and script and nothing
// else: no request leaves the page.
const statusPageCSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

// chart is the decisions-per-second chart as SVG polylines, one point per
// second.
type chart struct {
	Width, Height   int
	Allowed, Denied string
	Peak            int64
}

const chartHeight = 120

func chartOf(seconds []wire.Second) chart {
	c := chart{Width: max(len(seconds), 1), Height: chartHeight}
	for _, s := range seconds {
		c.Peak = max(c.Peak, s.Allowed, s.Denied)
	}
	scale := max(c.Peak, 1)
	var allowed, denied strings.Builder
	for x, s := range seconds {
		point(&allowed, x, chartHeight-1-s.Allowed*(chartHeight-2)/scale)
		point(&denied, x, chartHeight-1-s.Denied*(chartHeight-2)/scale)
	}
	c.Allowed, c.Denied = allowed.String(), denied.String()
	return c
}

func point(b *strings.Builder, x int, y int64) {
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString(strconv.Itoa(x))
	b.WriteByte(',')
	b.WriteString(strconv.FormatInt(y, 10))
}

func (a *API) statusPage(w http.ResponseWriter, r *http.Request) {
	st := a.statsOf(r, DefaultStatsTop)
	var lastMinute wire.Second
	for _, s := range st.Seconds[max(len(st.Seconds)-60, 0):] {
		lastMinute.Allowed += s.Allowed
		lastMinute.Denied += s.Denied
	}
	data := struct {
		Stats      wire.Stats
		Chart      chart
		LastMinute wire.Second
		Now        string
	}{st, chartOf(st.Seconds), lastMinute, time.UnixMilli(st.NowMS).UTC().Format(time.RFC3339)}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", statusPageCSP)
	w.Header().Set("Cache-Control", "no-store")
	if err := statusPage.Execute(w, data); err != nil {
		a.opts.Logger.Error("render the status page", "err", err)
	}
}

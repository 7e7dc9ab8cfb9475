// Chart: an inline SVG drawing kept as plain shapes.

package render

// Chart is an inline SVG drawing kept as plain shapes. The "chart" template draws, in this
// order, the rects, lines, circles, polylines and texts: bands and bars under rules, marks
// on top, labels last.
type Chart struct {
	W, H      int
	Rects     []Rect
	Lines     []Line
	Circles   []Circle
	Polylines []Polyline
	Texts     []Text
}

// Rect is a bar or a shaded band; Title is its tooltip; Opacity 0 is opaque.
type Rect struct {
	X, Y, W, H   int
	Color, Title string
	Opacity      float64
}

// Line is a rule or a marker.
type Line struct {
	X1, Y1, X2, Y2 int
	Color          string
	Dashed         bool
}

// Circle is one dot of a timeline (radius 3).
type Circle struct {
	X, Y         int
	Color, Title string
}

// Polyline is a series: Points is "x,y x,y …"; Width its stroke width.
type Polyline struct {
	Points, Color, Title string
	Width                float64
}

// Text is a label: End anchors it at its right end; Muted greys it, Color colours it.
type Text struct {
	X, Y  int
	S     string
	End   bool
	Muted bool
	Color string
}

// MutedColor is the grey of a muted label.
const MutedColor = "#57606a"

// Table: the row model a report's tables can share.

package render

// Table is a plain table: a header and rows of cells, with an optional caption. The kit's
// "table" template draws it in Markdown (cells through cell) and in HTML.
type Table struct {
	Caption string
	Header  []string
	Rows    [][]string
}

package histgraph

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// render lays out nodes given as "id:parent,parent" and draws each row's
// text as its id.
func render(t *testing.T, spec ...string) string {
	t.Helper()
	nodes := make([]Node, len(spec))
	lines := make([]string, len(spec))
	for i, s := range spec {
		id, ps, _ := strings.Cut(s, ":")
		fmt.Sscan(id, &nodes[i].ID)
		for _, p := range strings.Split(ps, ",") {
			if p == "" {
				continue
			}
			var v int64
			fmt.Sscan(p, &v)
			nodes[i].Parents = append(nodes[i].Parents, v)
		}
		lines[i] = id
	}
	var b bytes.Buffer
	if err := WriteText(&b, Lay(nodes), lines); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestLayText(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec []string
		want string
	}{
		{"linear", []string{"3:2", "2:1", "1:"}, `
○ 3
○ 2
○ 1
`},
		{"fork", []string{"5:3", "4:2", "3:2", "2:1", "1:"}, `
○ 5
│ ○ 4
○ │ 3
├─╯
○ 2
○ 1
`},
		{"two forks from one op", []string{"6:4", "5:3", "4:2", "3:2", "2:1", "1:"}, `
○ 6
│ ○ 5
○ │ 4
│ ○ 3
├─╯
○ 2
○ 1
`},
		{"three branches join one op", []string{"5:2", "4:2", "3:2", "2:1", "1:"}, `
○ 5
│ ○ 4
│ │ ○ 3
├─┴─╯
○ 2
○ 1
`},
		{"merge", []string{"6:4,5", "5:3", "4:2", "3:2", "2:1", "1:"}, `
○ 6
├─╮
│ ○ 5
○ │ 4
│ ○ 3
├─╯
○ 2
○ 1
`},
		{"merge of a parent another column waits for", []string{"7:6", "6:3", "5:4,3", "4:2", "3:2", "2:1", "1:"}, `
○ 7
○ 6
│ ○ 5
├─┤
│ ○ 4
○ │ 3
├─╯
○ 2
○ 1
`},
		{"columns free up and join later", []string{"6:2", "5:4", "4:2", "3:1", "2:1", "1:"}, `
○ 6
│ ○ 5
│ ○ 4
│ │ ○ 3
├─╯ │
○   │ 2
├───╯
○ 1
`},
		{"a join across a busy column", []string{"5:2", "4:1", "3:2", "2:1", "1:"}, `
○ 5
│ ○ 4
│ │ ○ 3
├─┼─╯
○ │ 2
├─╯
○ 1
`},
		{"a node without parents shown does not sit on top of the next", []string{"4:", "3:1", "2:", "1:"}, `
○ 4
  ○ 3
○ │ 2
  ○ 1
`},
		{"parents not listed or not after the node are not drawn", []string{"3:9", "2:3", "1:"}, `
○ 3
  ○ 2
○ 1
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := "\n" + render(t, tc.spec...)
			if got != tc.want {
				t.Errorf("got:%s\nwant:%s", got, tc.want)
			}
		})
	}
}

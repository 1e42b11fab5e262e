package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cMakefile builds every .c file of its directory into app, with -MMD
// dependency files, as a typical small C project does.
const cMakefile = `CFLAGS = -O2 -g -Wall
SRCS = $(wildcard *.c)
OBJS = $(SRCS:.c=.o)

app: $(OBJS)
	$(CC) -o $@ $(OBJS)

%.o: %.c
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

-include $(OBJS:.o=.d)
`

// writeCProject generates a C project of n modules plus main.c in dir:
// each module a few dozen lines of loops, switches and a qsort that give
// gcc -O2 some work, all sharing one header.
func writeCProject(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var h strings.Builder
	h.WriteString("#ifndef COMMON_H\n#define COMMON_H\n#include <stddef.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\n")
	h.WriteString("struct state { uint64_t a[32]; int n; };\n\n")
	for i := range n {
		fmt.Fprintf(&h, "uint64_t mod%03d(uint64_t x);\n", i)
	}
	h.WriteString("#endif\n")
	files := map[string]string{"Makefile": cMakefile, "common.h": h.String()}

	var m strings.Builder
	m.WriteString("#include <stdio.h>\n#include \"common.h\"\n\nint main(void) {\n\tuint64_t s = 0;\n")
	for i := range n {
		fmt.Fprintf(&m, "\ts ^= mod%03d(s + %d);\n", i, i)
	}
	m.WriteString("\tprintf(\"%llu\\n\", (unsigned long long)s);\n\treturn 0;\n}\n")
	files["main.c"] = m.String()

	for i := range n {
		var c strings.Builder
		c.WriteString("#include \"common.h\"\n\n")
		const helpers = 2
		for k := range helpers {
			fmt.Fprintf(&c, `static uint64_t mix%d(uint64_t x, int j) {
	for (int r = 0; r < %d; r++) {
		switch ((x + j + r) & 7) {
		case 0: x ^= x << 13; break;
		case 1: x ^= x >> 7; break;
		case 2: x *= 0x%xULL; break;
		case 3: x += (x << 3) ^ %dULL; break;
		case 4: x = (x >> 11) | (x << 53); break;
		case 5: x -= j * %dULL; break;
		case 6: x ^= 0x%xULL; break;
		default: x = ~x;
		}
	}
	return x;
}

`, k, 4+k, 0x9E3779B97F4A7C15^uint64(i*7919+k), i+k, k+1, uint64(i)<<20|uint64(k))
		}
		c.WriteString("static int cmp(const void *a, const void *b) {\n\tuint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;\n\treturn (x > y) - (x < y);\n}\n\n")
		c.WriteString("static void fill(struct state *s, uint64_t seed) {\n\tfor (int j = 0; j < 32; j++) {\n\t\tuint64_t v = seed + j;\n")
		for k := range helpers {
			fmt.Fprintf(&c, "\t\tv = mix%d(v, j);\n", k)
		}
		c.WriteString("\t\ts->a[j] = v;\n\t}\n\ts->n = 32;\n}\n\n")
		fmt.Fprintf(&c, `uint64_t mod%03d(uint64_t x) {
	struct state s;
	memset(&s, 0, sizeof s);
	fill(&s, x ^ %dULL);
	qsort(s.a, s.n, sizeof s.a[0], cmp);
	uint64_t r = 0;
	for (int j = 0; j < s.n; j++)
		r = r * 31 + (s.a[j] ^ (r >> 7));
	return r;
}
`, i, i)
		files[fmt.Sprintf("mod%03d.c", i)] = c.String()
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

package merge

// Labels name the three sides in conflict markers, as git merge-file's -L
// options do: Ours after "<<<<<<<", Base after "|||||||", Theirs after
// ">>>>>>>". An empty label leaves the marker bare.
type Labels struct {
	Ours, Base, Theirs string
}

// TextOptions are the choices of a text merge: the marker labels, and a
// side that wins each conflicting hunk instead of markers (git merge-file
// --ours / --theirs).
type TextOptions struct {
	Labels Labels
	Favor  Side // Ours or Theirs; 0 writes markers
}

// TextResult is a text merge's outcome. Conflicts counts the hunks written
// with markers (git merge-file's exit status, which git caps at 127);
// Favored counts the conflicting hunks that Favor decided instead.
type TextResult struct {
	Merged    []byte
	Conflicts int
	Favored   int
}

// Text merges ours and theirs against base line by line, with diff3-style
// conflict markers. The output and the count are git merge-file's (see the
// package doc for the inputs that holds for): `git merge-file --diff3 -p
// -L labels.Ours -L labels.Base -L labels.Theirs ours base theirs`. The
// inputs are not modified; the result never aliases them.
func Text(base, ours, theirs []byte, o TextOptions) TextResult {
	var in interner
	b, l1, l2 := splitLines(base), splitLines(ours), splitLines(theirs)
	bi, oi, ti := in.ids(b), in.ids(l1), in.ids(l2)
	d1 := diffLines(bi, oi, in.n())
	d2 := diffLines(bi, ti, in.n())
	// A side that changed nothing leaves the other side's file as the
	// result, byte for byte.
	switch {
	case len(d1) == 0:
		return TextResult{Merged: append([]byte{}, theirs...)}
	case len(d2) == 0:
		return TextResult{Merged: append([]byte{}, ours...)}
	}
	f := files{base: b, ours: l1, theirs: l2, ids: [3][]int32{bi, oi, ti}}
	hunks := f.align(d1, d2)
	return f.write(hunks, o)
}

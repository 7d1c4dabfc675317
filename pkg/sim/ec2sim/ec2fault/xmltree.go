package ec2fault

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// node is one piece of a parsed XML document: an element (name, attributes
// and children, in document order), or, with an empty name, a run of
// character data, or a comment.
//
// Names and attributes are kept as written (xml.Decoder.RawToken): Space
// is the prefix, not the namespace URL, and xmlns declarations stay among
// the attributes, so writing the tree back keeps the root's xmlns.
type node struct {
	name     xml.Name
	attrs    []xml.Attr
	children []*node
	text     string // character data or comment text (elements: unused)
	comment  bool
}

// document is a parsed XML answer: the bytes before the root element (the
// XML declaration) and after it, verbatim, and the root.
type document struct {
	prolog, epilog []byte
	root           *node
}

// parseDocument parses raw into a tree. Processing instructions and
// directives inside the root are refused (EC2 answers have none).
func parseDocument(raw []byte) (*document, error) {
	d := xml.NewDecoder(bytes.NewReader(raw))
	doc := &document{}
	var stack []*node
	for {
		before := d.InputOffset()
		tok, err := d.RawToken()
		if err == io.EOF {
			switch {
			case doc.root == nil:
				return nil, errors.New("ec2fault: no root element")
			case len(stack) > 0:
				return nil, errors.New("ec2fault: unexpected end of document")
			}
			return doc, nil
		}
		if err != nil {
			return nil, fmt.Errorf("ec2fault: parse answer: %w", err)
		}
		if len(stack) == 0 { // outside the root
			if t, ok := tok.(xml.StartElement); ok {
				if doc.root != nil {
					return nil, errors.New("ec2fault: more than one root element")
				}
				doc.prolog = raw[:before]
				doc.root = &node{name: t.Name, attrs: t.Copy().Attr}
				stack = append(stack, doc.root)
			}
			continue
		}
		top := stack[len(stack)-1]
		switch t := tok.(type) {
		case xml.StartElement:
			n := &node{name: t.Name, attrs: t.Copy().Attr}
			top.children = append(top.children, n)
			stack = append(stack, n)
		case xml.EndElement:
			if t.Name != top.name {
				return nil, fmt.Errorf("ec2fault: parse answer: </%s> closes <%s>", qname(t.Name), qname(top.name))
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				doc.epilog = raw[d.InputOffset():] // checked by reading on
			}
		case xml.CharData:
			top.children = append(top.children, &node{text: string(t)})
		case xml.Comment:
			top.children = append(top.children, &node{text: string(t), comment: true})
		default:
			return nil, fmt.Errorf("ec2fault: parse answer: unsupported %T inside <%s>", tok, qname(top.name))
		}
	}
}

// bytes serializes the document.
func (doc *document) bytes() []byte {
	var buf bytes.Buffer
	buf.Write(doc.prolog)
	doc.root.write(&buf)
	buf.Write(doc.epilog)
	return buf.Bytes()
}

// write serializes n. Character data and attribute values are escaped as
// encoding/xml's encoder escapes them (newlines and quotes as character
// references too), so an answer the simulator encoded comes back byte for
// byte; an element is always written as a start and an end tag.
func (n *node) write(buf *bytes.Buffer) {
	switch {
	case n.comment:
		buf.WriteString("<!--")
		buf.WriteString(n.text)
		buf.WriteString("-->")
		return
	case n.isText():
		_ = xml.EscapeText(buf, []byte(n.text))
		return
	}
	buf.WriteByte('<')
	buf.WriteString(qname(n.name))
	for _, a := range n.attrs {
		buf.WriteByte(' ')
		buf.WriteString(qname(a.Name))
		buf.WriteString(`="`)
		_ = xml.EscapeText(buf, []byte(a.Value))
		buf.WriteByte('"')
	}
	buf.WriteByte('>')
	for _, c := range n.children {
		c.write(buf)
	}
	buf.WriteString("</")
	buf.WriteString(qname(n.name))
	buf.WriteByte('>')
}

func qname(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}

func (n *node) isText() bool { return n.name.Local == "" && !n.comment }

func (n *node) isElement(local string) bool {
	return n.name.Local != "" && n.name.Local == local
}

// child is n's first child element with the local name, nil if none.
func (n *node) child(local string) *node {
	for _, c := range n.children {
		if c.isElement(local) {
			return c
		}
	}
	return nil
}

// path follows child elements by local name, nil if one is missing.
func (n *node) path(locals ...string) *node {
	for _, l := range locals {
		if n == nil {
			return nil
		}
		n = n.child(l)
	}
	return n
}

// elements are n's child elements with the local name.
func (n *node) elements(local string) []*node {
	var out []*node
	for _, c := range n.children {
		if c.isElement(local) {
			out = append(out, c)
		}
	}
	return out
}

// value is the character data directly inside n.
func (n *node) value() string {
	var s string
	for _, c := range n.children {
		if c.isText() {
			s += c.text
		}
	}
	return s
}

// childValue is the value of n's first child element with the local name.
func (n *node) childValue(local string) string {
	if c := n.child(local); c != nil {
		return c.value()
	}
	return ""
}

// setValue replaces n's children with the character data s.
func (n *node) setValue(s string) { n.children = []*node{{text: s}} }

// remove takes child c out of n; it reports whether c was there.
func (n *node) remove(c *node) bool {
	for i, x := range n.children {
		if x == c {
			n.children = append(n.children[:i:i], n.children[i+1:]...)
			return true
		}
	}
	return false
}

package ec2fault

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const sampleAnswer = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
	`<DescribeNetworkInterfacesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">` +
	`<requestId>r-1</requestId><networkInterfaceSet>` +
	`<item><networkInterfaceId>eni-a</networkInterfaceId><description>a &amp; &lt;b&gt; &#34;q&#34;</description>` +
	`<ipv4PrefixSet><item><ipv4Prefix>10.0.0.16/28</ipv4Prefix></item><item><ipv4Prefix>10.0.0.32/28</ipv4Prefix></item></ipv4PrefixSet></item>` +
	`<item><networkInterfaceId>eni-b</networkInterfaceId><tagSet></tagSet></item>` +
	`</networkInterfaceSet><nextToken>tok</nextToken></DescribeNetworkInterfacesResponse>`

func TestTreeRoundTrip(t *testing.T) {
	for name, raw := range map[string]string{
		"simulator answer":      sampleAnswer,
		"prefixes and comments": "<?xml version=\"1.0\"?>\n<!-- before -->\n<a:Root xmlns:a=\"urn:x\" b=\"1 &lt; 2\">&#xA;  <a:kid>x</a:kid>&#xA;  <!-- inside --></a:Root>\n<!-- after -->\n",
		"no declaration":        `<Root><x>1</x></Root>`,
	} {
		t.Run(name, func(t *testing.T) {
			doc, err := parseDocument([]byte(raw))
			require.NoError(t, err)
			require.Equal(t, raw, string(doc.bytes()))
		})
	}
}

func TestTreeSelfClosingBecomesPair(t *testing.T) {
	doc, err := parseDocument([]byte(`<Root xmlns="urn:x"><set/></Root>`))
	require.NoError(t, err)
	require.Equal(t, `<Root xmlns="urn:x"><set></set></Root>`, string(doc.bytes()))
}

func TestTreeEdit(t *testing.T) {
	doc, err := parseDocument([]byte(sampleAnswer))
	require.NoError(t, err)
	require.Equal(t, "DescribeNetworkInterfacesResponse", doc.root.name.Local)
	set := doc.root.child("networkInterfaceSet")
	items := set.elements("item")
	require.Len(t, items, 2)
	require.Equal(t, `a & <b> "q"`, items[0].childValue("description"))
	require.Nil(t, doc.root.path("networkInterfaceSet", "missing", "x"))

	require.True(t, set.remove(items[1]))
	require.False(t, set.remove(items[1]))
	pfx := items[0].path("ipv4PrefixSet", "item", "ipv4Prefix")
	pfx.setValue("10.0.0.48/28")
	want := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<DescribeNetworkInterfacesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">` +
		`<requestId>r-1</requestId><networkInterfaceSet>` +
		`<item><networkInterfaceId>eni-a</networkInterfaceId><description>a &amp; &lt;b&gt; &#34;q&#34;</description>` +
		`<ipv4PrefixSet><item><ipv4Prefix>10.0.0.48/28</ipv4Prefix></item><item><ipv4Prefix>10.0.0.32/28</ipv4Prefix></item></ipv4PrefixSet></item>` +
		`</networkInterfaceSet><nextToken>tok</nextToken></DescribeNetworkInterfacesResponse>`
	require.Equal(t, want, string(doc.bytes()))
}

func TestTreeRefusesBadDocuments(t *testing.T) {
	for name, raw := range map[string]string{
		"empty":           ``,
		"unclosed":        `<a><b></b>`,
		"mismatched":      `<a><b></a></b>`,
		"two roots":       `<a></a><b></b>`,
		"inner directive": `<a><!DOCTYPE x></a>`,
		"not xml":         `{"json": true}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseDocument([]byte(raw))
			require.Error(t, err)
		})
	}
}

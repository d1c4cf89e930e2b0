"""Clicking every header of every sortable table of a memory page in a
browser, and checking what the clicks did (``test_report_html``,
``test_notebook``).

``SCRIPT(root)`` is a script to put at the end of a page: it clicks each
header twice and writes, per table and column, the column's sort keys after
each click (a cell's ``data-v``, else its text: what a reader sorts by) into
a ``<pre id="sort-probe">`` that ``--dump-dom`` shows. ``check`` asserts each
column was sorted both ways: numbers (a ``data-num`` header) in descending
then ascending order, text in two opposite orders.
"""

import html
import json
import re

SCRIPT = """<script>
(function(){
 var out=[];
 document.querySelectorAll('%(root)s table.sortable').forEach(function(t){
  var cols=[];
  t.querySelectorAll('th').forEach(function(th,i){
   function keys(){return Array.prototype.map.call(t.tBodies[0].rows,function(r){
     var d=r.cells[i];return d.dataset.v!==undefined?d.dataset.v:d.textContent;});}
   th.click();var first=keys();th.click();
   cols.push({name:th.textContent,num:th.dataset.num==='1',first:first,second:keys()});});
  out.push(cols);});
 var p=document.createElement('pre');p.id='sort-probe';p.textContent=JSON.stringify(out);
 document.body.appendChild(p);
})();
</script>"""


def script(root: str = "") -> str:
    """The probe, for the tables under the CSS selector ``root`` (all of the page's when empty)."""
    return SCRIPT % {"root": root}


def read(dom: str) -> list:
    m = re.search(r'<pre id="sort-probe">(.*?)</pre>', dom, re.S)
    assert m, dom[-2000:]
    return json.loads(html.unescape(m.group(1)))


def _number(v: str) -> float:
    try:
        return float(v)
    except ValueError:
        return -1.0  # as the page's script: a cell with no number sorts first


def check(tables: list) -> int:
    """Asserts every column sorted both ways; returns how many columns had
    two or more different keys (so that a caller can ask that some did)."""
    assert tables, "no sortable table on the page"
    sorted_columns = 0
    for cols in tables:
        for c in cols:
            first, second = c["first"], c["second"]
            assert sorted(first) == sorted(second), c["name"]   # the same rows, reordered
            if c["num"]:
                a, b = [_number(v) for v in first], [_number(v) for v in second]
                assert a == sorted(a, reverse=True), (c["name"], first)
                assert b == sorted(b), (c["name"], second)
            if len(set(first)) > 1:
                sorted_columns += 1
                # the second click reverses the first: the distinct keys in opposite orders
                seen_a = list(dict.fromkeys(first))
                seen_b = list(dict.fromkeys(second))
                assert seen_a == seen_b[::-1], (c["name"], first, second)
    return sorted_columns

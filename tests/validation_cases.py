"""One table of shape texts and what validating them says.

Each row is ``(text, message)``: ``message`` is None for a valid shape, else
the exact message of :class:`~xlashape.InvalidShapeError`. The same table
drives ``tests/test_validation_table.py`` (xlashape's two entry points) and
``tests/oracle/gen_validation.py`` (XLA's verdict on every row, recorded in
``tests/data/xla_validation.json``). Every text parses on its own: XLA's
parser validates only tuple elements.
"""

CASES = [
    # -- valid ------------------------------------------------------------------
    ("f32[2,3]{1,0}", None),
    ("f32[2,3]", None),
    ("f32[]", None),
    ("f32[?,?]", None),
    ("f32[8]{0:SC(0:7)}", None),
    ("f32[8]{0:SC(0:1,2,3,4,5,6,7)}", None),
    ("f32[4,8]{1,0:SC(0:1)(1:2)}", None),
    ("f32[4,8]{1,0:SC(1:2)(0:1)}", None),        # config order is not checked
    ("f32[4,8]{0,1:SC(0:7)}", None),             # physical 0 is dimension 1 (size 8)
    ("f32[4,8]{0,1:SC(1:3)}", None),             # physical 1 is dimension 0 (size 4)
    ("f32[<=8]{0:SC(0:3)}", None),
    ("f32[0]{0:SC(0:)}", None),
    ("f32[256]{0:T(128)SC(0:100)}", None),       # splits need not follow tiles
    ("f32[2]{0:S(-1)}", None),
    ("f32[2]{0:S(5)}", None),
    ("f32[2]{0:M(5)}", None),
    ("f32[2]{0:M(-3)}", None),
    ("f32[2]{0:T(*)}", None),
    ("f32[2]{0:T(2,2,2)}", None),                # more tile dims than the shape
    ("f32[2]{0:T(2)L(3)}", None),
    ("f32[2]{0:E(3)}", None),                    # narrower than the type
    ("pred[3]{0:E(1)}", None),
    ("s4[2]{0:E(64)}", None),
    ("f32[2]{0:D(C)}", None),                    # dim level types are dropped
    ("f32[2305843009213693951]{0}", None),
    ("c128[576460752303423487]{0}", None),
    ("s4[9223372036854775807]{0}", None),
    ("pred[9223372036854775807]{0}", None),
    ("b(f32[8]{0:SC(0:7)})", None),
    ("(f32[2], token[])", None),
    # -- the layout's minor_to_major ----------------------------------------------
    ("f32[2]{5}", "layout minor_to_major field has out-of-bounds value: {5}; shape: f32[2]"),
    ("f32[2]{-1}", "layout minor_to_major field has out-of-bounds value: {-1}; shape: f32[2]"),
    ("f32[2,2]{0,0}", "layout minor_to_major field has duplicate values: {0, 0}; "
                      "shape: f32[2,2]"),
    ("f32[2,3,4]{0,5,0}", "layout minor_to_major field has out-of-bounds value: {0, 5, 0}; "
                          "shape: f32[2,3,4]"),
    ("f32[2,3,4]{0,0,5}", "layout minor_to_major field has duplicate values: {0, 0, 5}; "
                          "shape: f32[2,3,4]"),
    # -- other layout fields --------------------------------------------------------
    ("f32[2]{0:#(u32)}", "layout has a index_primitive_type, but is not a sparse array: f32[2]"),
    ("f32[2]{0:#(s32)}", "layout has a index_primitive_type, but is not a sparse array: f32[2]"),
    ("f32[2]{0:*(u8)}", "layout has a pointer_primitive_type, but is not a sparse array: f32[2]"),
    ("f32[2]{0:T(0)}", "layout has invalid tiles: f32[2]"),
    ("f32[2]{0:T(2,0)}", "layout has invalid tiles: f32[2]"),
    ("f32[2]{0:T(8)(0)}", "layout has invalid tiles: f32[2]"),
    ("f32[2]{0:E(-1)}", "layout element_size_in_bits field is negative: -1"),
    # -- split configs ----------------------------------------------------------------
    ("f32[8]{0:SC(0:9)}", "split indices [9] must increase strictly within (0, 8): f32[8]"),
    ("f32[8]{0:SC(0:8)}", "split indices [8] must increase strictly within (0, 8): f32[8]"),
    ("f32[8]{0:SC(0:0)}", "split indices [0] must increase strictly within (0, 8): f32[8]"),
    ("f32[8]{0:SC(0:-1)}", "split indices [-1] must increase strictly within (0, 8): f32[8]"),
    ("f32[8]{0:SC(0:4,3)}", "split indices [4, 3] must increase strictly within (0, 8): f32[8]"),
    ("f32[8]{0:SC(0:3,3)}", "split indices [3, 3] must increase strictly within (0, 8): f32[8]"),
    ("f32[0]{0:SC(0:0)}", "split indices [0] must increase strictly within (0, 0): f32[0]"),
    ("f32[<=8]{0:SC(0:8)}", "split indices [8] must increase strictly within (0, 8): f32[<=8]"),
    ("f32[?]{0:SC(0:1)}", "split indices [1] must increase strictly within (0, ?): f32[?]"),
    ("f32[4,8]{0,1:SC(1:4)}", "split indices [4] must increase strictly within (0, 4): "
                              "f32[4,8]"),
    ("f32[8]{0:SC(1:3)}", "split config dimension 1 is out of range for 1 dimensions: f32[8]"),
    ("f32[8]{0:SC(-1:3)}", "split config dimension -1 is out of range for 1 dimensions: f32[8]"),
    ("f32[]{:SC(0:1)}", "split config dimension 0 is out of range for 0 dimensions: f32[]"),
    ("f32[8]{0:SC(0:3)(0:4)}", "more than one split config for dimension 0: f32[8]"),
    ("f32[8]{0:SC(0:)(0:)}", "more than one split config for dimension 0: f32[8]"),
    ("b(f32[8]{0:SC(0:9)})", "split indices [9] must increase strictly within (0, 8): f32[8]"),
    # -- sizes --------------------------------------------------------------------------
    ("f32[2305843009213693952]", "Shape f32[2305843009213693952] size may overflow int64_t."),
    ("c128[576460752303423488]{0}",
     "Shape c128[576460752303423488] size may overflow int64_t."),
    ("f32[<=2305843009213693952]",
     "Shape f32[<=2305843009213693952] size may overflow int64_t."),
    ("f32[?,2305843009213693952]",
     "Shape f32[?,2305843009213693952] size may overflow int64_t."),
    ("f32[9223372036854775807,2]",
     "Shape Error: Dimensions overflow. Shape(f32): f32[9223372036854775807,2]"),
    ("u8[4611686018427387904,4,0]",
     "Shape Error: Dimensions overflow. Shape(u8): u8[4611686018427387904,4,0]"),
    # A size problem is reported before a layout problem.
    ("f32[9223372036854775807,2]{0,0}",
     "Shape Error: Dimensions overflow. Shape(f32): f32[9223372036854775807,2]"),
]

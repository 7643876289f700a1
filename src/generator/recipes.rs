//! The operators the generator draws: one recipe table per operand pool (float32, int64, the
//! float32 side ops whose results become extra outputs, and Int scalars). Each recipe is an
//! operator kind, how many slots of its pool's draw it takes (its weight), what the graph must
//! offer for it to be made, and how its operands and parameters are drawn. A pool's draw picks a
//! slot uniformly; an op the configuration does not allow, or the graph cannot feed, makes
//! nothing. Every `OpKind` is in a table or named in [`BUILDING_BLOCKS`] (`every_op_kind_has_a_recipe`).
//! May not touch: the byte stream (the generator draws; this only describes).

use crate::ir::OpKind;

/// Slots a recipe takes in its pool's draw, without and with the graph's constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weight {
    /// Slots when the graph has no constants.
    pub without_constants: usize,
    /// Slots when it has them.
    pub with_constants: usize,
}

impl Weight {
    /// One slot, whatever the graph.
    pub const ONE: Weight = Weight { without_constants: 1, with_constants: 1 };

    /// The slots it takes in a graph with (`constants`) or without constants.
    pub fn slots(self, constants: bool) -> usize {
        if constants { self.with_constants } else { self.without_constants }
    }
}

/// What a graph must offer for a recipe to be made (else its slot makes nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    /// A static operand (not the dynamic-shaped pool).
    pub static_shape: bool,
    /// The graph's constants.
    pub constants: bool,
    /// Scalar side results may be kept (a method's top level).
    pub scalars: bool,
}

impl Needs {
    /// Nothing beyond an operand of the pool.
    pub const NOTHING: Needs = Needs { static_shape: false, constants: false, scalars: false };
}

/// How a recipe draws its operands and parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `x ∘ y`, `y` from the same pool, or (float32) a broadcasting constant; either order.
    Binary,
    /// `f(x)`.
    Unary,
    /// `linear(x, w, b)` on the graph's constants.
    Linear,
    /// `addmm(b, x, w)` or `mm(x, w)`, one in two.
    MatMul,
    /// `cumsum(x, dim)`.
    Cumsum,
    /// `permute_copy(x, [1, 0])`.
    Transpose,
    /// `select_copy(x, dim, index)`.
    Select,
    /// `index_select(x, 0, idx)` with the index constant.
    IndexSelect,
    /// `argmax(x, dim?, keepdim)`; float32 may also reduce the whole tensor.
    Argmax,
    /// `x > c`, a small constant.
    GtScalar,
    /// `x > y`.
    GtTensor,
    /// `view(x, shape)` of the same element count, sometimes followed by a relu.
    View,
    /// `sym_size(x, dim)`, then (its second slot) scalar arithmetic on the sizes so far.
    Sizes,
    /// `a ∘ b` on Int scalars (a floor division only by a size).
    Scalar,
    /// `a ≶ b` on Int scalars, a Bool kept as a scalar side result.
    ScalarCompare,
}

/// One operator the generator makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recipe {
    /// The operator.
    pub kind: OpKind,
    /// Its slots in the pool's draw.
    pub weight: Weight,
    /// What the graph must offer.
    pub needs: Needs,
    /// How it draws.
    pub form: Form,
}

/// When a pool checks that the configuration allows the drawn operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Before drawing its operands and parameters.
    BeforeDraw,
    /// After (the parameters' bytes are spent either way).
    AfterDraw,
}

/// A pool's recipes, in slot order.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    /// Name, for reports and tests.
    pub name: &'static str,
    /// Recipes in slot order.
    pub recipes: &'static [Recipe],
    /// When the configuration is consulted.
    pub check: Check,
}

impl Table {
    /// Slots of the draw in a graph with or without constants.
    pub fn slots(&self, constants: bool) -> usize {
        self.recipes.iter().map(|r| r.weight.slots(constants)).sum()
    }

    /// The recipe of slot `k` and which of its slots `k` is (`None` past the last).
    pub fn at(&self, k: usize, constants: bool) -> Option<(&'static Recipe, usize)> {
        let mut k = k;
        for r in self.recipes {
            let n = r.weight.slots(constants);
            if k < n {
                return Some((r, k));
            }
            k -= n;
        }
        None
    }
}

const fn recipe(kind: OpKind, form: Form) -> Recipe {
    Recipe { kind, weight: Weight::ONE, needs: Needs::NOTHING, form }
}

const fn with_constants(kind: OpKind, form: Form, without: usize) -> Recipe {
    Recipe { kind, weight: Weight { without_constants: without, with_constants: 1 }, needs: Needs::NOTHING, form }
}

const fn needing(kind: OpKind, form: Form, needs: Needs) -> Recipe {
    Recipe { kind, weight: Weight::ONE, needs, form }
}

const STATIC: Needs = Needs { static_shape: true, constants: false, scalars: false };

/// Float32 ops whose result stays in its pool: elementwise, matrix products on the constants,
/// cumulative sums (which take the product slots when there are no constants).
pub const FLOAT: Table = Table {
    name: "float32",
    recipes: &[
        recipe(OpKind::Add, Form::Binary),
        recipe(OpKind::Sub, Form::Binary),
        recipe(OpKind::Mul, Form::Binary),
        recipe(OpKind::Div, Form::Binary),
        recipe(OpKind::Relu, Form::Unary),
        recipe(OpKind::Sin, Form::Unary),
        recipe(OpKind::Cos, Form::Unary),
        with_constants(OpKind::Linear, Form::Linear, 0),
        with_constants(OpKind::Addmm, Form::MatMul, 0),
        with_constants(OpKind::Cumsum, Form::Cumsum, 3),
    ],
    check: Check::BeforeDraw,
};

/// Float32 ops whose results change type or shape: kept as extra outputs.
pub const FLOAT_SIDE: Table = Table {
    name: "float32 side",
    recipes: &[
        needing(OpKind::PermuteCopy, Form::Transpose, STATIC),
        recipe(OpKind::SelectCopy, Form::Select),
        needing(OpKind::IndexSelect, Form::IndexSelect, Needs { static_shape: true, constants: true, scalars: false }),
        recipe(OpKind::Argmax, Form::Argmax),
        recipe(OpKind::Gt, Form::GtScalar),
        recipe(OpKind::GtTensor, Form::GtTensor),
        needing(OpKind::View, Form::View, STATIC),
        Recipe {
            kind: OpKind::SymSize,
            weight: Weight { without_constants: 2, with_constants: 2 },
            needs: Needs { static_shape: false, constants: false, scalars: true },
            form: Form::Sizes,
        },
    ],
    check: Check::AfterDraw,
};

/// Int64 ops whose result stays in its pool (exact, wrapping).
pub const INT: Table = Table {
    name: "int64",
    recipes: &[
        recipe(OpKind::Add, Form::Binary),
        recipe(OpKind::Sub, Form::Binary),
        recipe(OpKind::Mul, Form::Binary),
        recipe(OpKind::Cumsum, Form::Cumsum),
        recipe(OpKind::Relu, Form::Unary),
    ],
    check: Check::AfterDraw,
};

/// Int64 ops whose results change type or shape: kept as extra outputs.
pub const INT_SIDE: Table = Table {
    name: "int64 side",
    recipes: &[
        recipe(OpKind::GtTensor, Form::GtTensor),
        recipe(OpKind::Argmax, Form::Argmax),
        recipe(OpKind::PermuteCopy, Form::Transpose),
        recipe(OpKind::SelectCopy, Form::Select),
    ],
    check: Check::AfterDraw,
};

/// Int scalar arithmetic and comparisons on sizes (the second slot of [`Form::Sizes`]).
pub const SCALAR: Table = Table {
    name: "int scalar",
    recipes: &[
        recipe(OpKind::ScalarAdd, Form::Scalar),
        recipe(OpKind::ScalarSub, Form::Scalar),
        recipe(OpKind::ScalarMul, Form::Scalar),
        recipe(OpKind::ScalarFloordiv, Form::Scalar),
        recipe(OpKind::ScalarEq, Form::ScalarCompare),
        recipe(OpKind::ScalarLt, Form::ScalarCompare),
        recipe(OpKind::ScalarGt, Form::ScalarCompare),
        recipe(OpKind::ScalarGe, Form::ScalarCompare),
        recipe(OpKind::ScalarLe, Form::ScalarCompare),
    ],
    check: Check::AfterDraw,
};

/// Every pool's table.
pub const TABLES: [Table; 5] = [FLOAT, FLOAT_SIDE, INT, INT_SIDE, SCALAR];

/// Operators made only as a part of another recipe, with the recipe or step that makes them.
pub const BUILDING_BLOCKS: &[(OpKind, &str)] = &[(OpKind::Mm, "the float32 `addmm` recipe (Form::MatMul)")];

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    #[test]
    fn every_op_kind_has_a_recipe() {
        for k in OpKind::iter() {
            let in_table = TABLES.iter().any(|t| t.recipes.iter().any(|r| r.kind == k));
            let block = BUILDING_BLOCKS.iter().any(|(b, _)| *b == k);
            assert!(
                in_table || block,
                "operator `{}` has no recipe: add it to a table in generator/recipes.rs",
                k.name()
            );
        }
    }

    #[test]
    fn a_draw_picks_slots_by_weight() {
        // Without constants the product slots go to cumsum; with them each op has one.
        assert_eq!((FLOAT.slots(false), FLOAT.slots(true)), (10, 10));
        let kinds = |c: bool| (0..10).map(|k| FLOAT.at(k, c).map(|(r, _)| r.kind)).collect::<Vec<_>>();
        assert_eq!(kinds(true)[7..], [Some(OpKind::Linear), Some(OpKind::Addmm), Some(OpKind::Cumsum)]);
        assert_eq!(kinds(false)[7..], [Some(OpKind::Cumsum); 3]);
        assert_eq!(FLOAT.at(10, true), None);
        assert_eq!((FLOAT_SIDE.slots(true), INT.slots(true), INT_SIDE.slots(true), SCALAR.slots(true)), (9, 5, 4, 9));
        assert_eq!(FLOAT_SIDE.at(8, false).map(|(r, slot)| (r.kind, slot)), Some((OpKind::SymSize, 1)));
    }
}

//! Scalar arithmetic over the element types, so kernels are written once.

/// Arithmetic shared by `f32`, `f64` and `i64`, the one definition of scalar semantics for
/// every evaluator (the graph interpreter here, the loop-IR executors in the scheduler).
/// Integer arithmetic wraps; `max`/`min` propagate NaN like numpy's `maximum`/`minimum`.
pub trait Num: Copy + PartialOrd + Default + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
    /// The identity of `max` (−∞ for floats).
    const LOWEST: Self;
    /// The identity of `min` (+∞ for floats).
    const HIGHEST: Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// Remainder of truncating division (sign of `self`).
    fn rem(self, o: Self) -> Self;
    fn pow(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn sign(self) -> Self;
    fn is_nan(self) -> bool;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn from_i64(v: i64) -> Self;

    fn max(self, o: Self) -> Self {
        if self.is_nan() || o.is_nan() {
            if self.is_nan() {
                self
            } else {
                o
            }
        } else if o > self {
            o
        } else {
            self
        }
    }

    fn min(self, o: Self) -> Self {
        if self.is_nan() || o.is_nan() {
            if self.is_nan() {
                self
            } else {
                o
            }
        } else if o < self {
            o
        } else {
            self
        }
    }

    /// `max(x, 0)`, keeping NaN.
    fn relu(self) -> Self {
        if self < Self::ZERO {
            Self::ZERO
        } else {
            self
        }
    }
}

/// Transcendental functions of the floating-point types.
pub(crate) trait Float: Num {
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn erf(self) -> Self;
    fn tanh(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
}

macro_rules! float_impl {
    ($t:ty, $erf:path) => {
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn rem(self, o: Self) -> Self {
                self % o
            }
            fn pow(self, o: Self) -> Self {
                self.powf(o)
            }
            fn neg(self) -> Self {
                -self
            }
            fn abs(self) -> Self {
                self.abs()
            }
            fn sign(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else {
                    self
                }
            }
            fn is_nan(self) -> bool {
                self.is_nan()
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }

        impl Float for $t {
            fn sqrt(self) -> Self {
                self.sqrt()
            }
            fn exp(self) -> Self {
                self.exp()
            }
            fn ln(self) -> Self {
                self.ln()
            }
            fn erf(self) -> Self {
                $erf(self)
            }
            fn tanh(self) -> Self {
                self.tanh()
            }
            fn sin(self) -> Self {
                self.sin()
            }
            fn cos(self) -> Self {
                self.cos()
            }
        }
    };
}

float_impl!(f32, libm::erff);
float_impl!(f64, libm::erf);

impl Num for i64 {
    const ZERO: Self = 0;
    const ONE: Self = 1;
    const LOWEST: Self = i64::MIN;
    const HIGHEST: Self = i64::MAX;
    fn add(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
    fn sub(self, o: Self) -> Self {
        self.wrapping_sub(o)
    }
    fn mul(self, o: Self) -> Self {
        self.wrapping_mul(o)
    }
    /// Truncating division; callers rule out a zero divisor first.
    fn div(self, o: Self) -> Self {
        self.wrapping_div(o)
    }
    fn rem(self, o: Self) -> Self {
        self.wrapping_rem(o)
    }
    fn pow(self, o: Self) -> Self {
        match o {
            o if o >= 0 => self.wrapping_pow(Ord::min(o, u32::MAX as i64) as u32),
            _ if self == 1 => 1,
            _ if self == -1 => {
                if o % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        }
    }
    fn neg(self) -> Self {
        self.wrapping_neg()
    }
    fn abs(self) -> Self {
        self.wrapping_abs()
    }
    fn sign(self) -> Self {
        self.signum()
    }
    fn is_nan(self) -> bool {
        false
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as i64
    }
    fn from_i64(v: i64) -> Self {
        v
    }
}

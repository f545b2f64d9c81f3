// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// A point of BN254 (alt_bn128) G1 in the EVM encoding: affine x and y, each below the field
/// prime P. The identity is (0, 0), the same convention the ecAdd and ecMul precompiles use.
struct Point {
    uint256 x;
    uint256 y;
}

/// @title BN254
/// @notice G1 arithmetic through the EVM precompiles 0x06 (ecAdd, 150 gas) and 0x07 (ecMul,
/// 6,000 gas). No field arithmetic happens in Solidity: the precompiles validate their inputs
/// (coordinates below P, point on the curve) and fail otherwise, so every point that passes
/// through `add` or `mul` is checked for free.
/// @dev A failing precompile call burns all the gas it was given and leaves the output buffer
/// untouched, so each call forwards exactly the precompile's price and checks the success flag.
library BN254 {
    /// The base field prime p.
    uint256 internal constant P = 21888242871839275222246405745257275088696311157297823662689037894645226208583;
    /// The order n of G1 (the scalar field).
    uint256 internal constant N = 21888242871839275222246405745257275088548364400416034343698204186575808495617;

    /// G = (1, 2), the standard generator.
    uint256 internal constant G_X = 1;
    uint256 internal constant G_Y = 2;

    /// H, the nothing-up-my-sleeve generator: the first counter ctr for which
    /// x = keccak256("PPS/v1/generator/H" || uint32be(ctr)) mod p lies on the curve (ctr = 2),
    /// with the even square root as y. Nobody knows log_G(H), which is what makes
    /// C = a·G + r·H hiding and binding. The TypeScript tests recompute it from the rule.
    uint256 internal constant H_X = 0x2ed763c0ab0b46b7ee62866787ec3a8fb38390065436982cda5d1691085246fb;
    uint256 internal constant H_Y = 0x003193607c15a0df207e5f5a1e026e6dd9321fc9592facc48b9e8f32b69065b2;

    /// (p + 1) / 4: since p ≡ 3 (mod 4), v^((p+1)/4) is a square root of v whenever v is a square.
    uint256 internal constant SQRT_EXPONENT = 0xc19139cb84c680a6e14116da060561765e05aa45a1c72a34f082305b61f3f52;
    /// Bit 255 of a compressed point holds the parity of y; x < P < 2^254 fills the bits below.
    uint256 internal constant PARITY_BIT = 1 << 255;

    uint256 private constant EC_ADD_GAS = 150;
    uint256 private constant EC_MUL_GAS = 6000;

    /// A point is off the curve, a coordinate is not below P, or a negated coordinate was out of range.
    error InvalidPoint();

    /// (ax, ay) + (bx, by). Reverts with `InvalidPoint` when either input is not a valid G1 point.
    function add(uint256 ax, uint256 ay, uint256 bx, uint256 by) internal view returns (uint256 x, uint256 y) {
        bool success;
        assembly ("memory-safe") {
            // Scratch space past the free memory pointer: the pointer is not moved, nothing is kept.
            let buffer := mload(0x40)
            mstore(buffer, ax)
            mstore(add(buffer, 0x20), ay)
            mstore(add(buffer, 0x40), bx)
            mstore(add(buffer, 0x60), by)
            success := staticcall(EC_ADD_GAS, 0x06, buffer, 0x80, buffer, 0x40)
            x := mload(buffer)
            y := mload(add(buffer, 0x20))
        }
        if (!success) revert InvalidPoint();
    }

    /// scalar · (px, py). Reverts with `InvalidPoint` when the input is not a valid G1 point.
    function mul(uint256 px, uint256 py, uint256 scalar) internal view returns (uint256 x, uint256 y) {
        bool success;
        assembly ("memory-safe") {
            let buffer := mload(0x40)
            mstore(buffer, px)
            mstore(add(buffer, 0x20), py)
            mstore(add(buffer, 0x40), scalar)
            success := staticcall(EC_MUL_GAS, 0x07, buffer, 0x60, buffer, 0x40)
            x := mload(buffer)
            y := mload(add(buffer, 0x20))
        }
        if (!success) revert InvalidPoint();
    }

    /// The y coordinate of −(x, y): P − y, with the identity's 0 kept. A y that is not below P
    /// is refused here, because P − y would wrap or alias and the precompile could no longer see it.
    function negateY(uint256 y) internal pure returns (uint256) {
        if (y >= P) revert InvalidPoint();
        return y == 0 ? 0 : P - y;
    }

    /// One storage word for a valid point: x with the parity of y in bit 255. The identity (0, 0)
    /// compresses to 0, and no other point does: x = 0 would need y² = 3, and 3 is not a
    /// square mod p. Only for points that ecAdd produced or validated: nothing is checked here.
    function compress(uint256 x, uint256 y) internal pure returns (uint256) {
        return x | (y << 255);
    }

    /// The point `compress` stored: y = ±(x³ + 3)^((p+1)/4) through the modexp precompile (0x05),
    /// the root whose parity matches the stored bit. The word must come from `compress` of a
    /// valid point, so the square root exists and is not checked again. (The transfer path does
    /// the same inline, ConfidentialToken._addInto.)
    function decompress(uint256 word) internal view returns (uint256 x, uint256 y) {
        if (word == 0) return (0, 0);
        x = word & (PARITY_BIT - 1);
        uint256 square = addmod(mulmod(mulmod(x, x, P), x, P), 3, P);
        uint256 p = P;
        bool success;
        assembly ("memory-safe") {
            let buffer := mload(0x40)
            mstore(buffer, 0x20)
            mstore(add(buffer, 0x20), 0x20)
            mstore(add(buffer, 0x40), 0x20)
            mstore(add(buffer, 0x60), square)
            mstore(add(buffer, 0x80), SQRT_EXPONENT)
            mstore(add(buffer, 0xa0), p)
            // All the gas: the price differs between forks (EIP-2565, EIP-7883), and the input
            // is fixed-size and valid, so only running out of gas can fail it.
            success := staticcall(gas(), 0x05, buffer, 0xc0, buffer, 0x20)
            y := mload(buffer)
        }
        if (!success) revert InvalidPoint();
        // y is never 0 for a point other than the identity (G1 has odd order), so P − y < P.
        if ((y ^ (word >> 255)) & 1 != 0) y = P - y;
    }

    /// Whether (x, y) is a valid G1 point (the identity included): ecAdd with the identity
    /// succeeds exactly for valid points.
    function requireValid(uint256 x, uint256 y) internal view {
        add(x, y, 0, 0);
    }
}

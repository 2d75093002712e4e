// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @notice Test-only ERC-1271 smart wallet: a signature is valid when its owner signed the hash
/// (r, s, v packed, as wallets pass EIP-712 signatures on). It holds tokens and cannot send anything.
contract TestWallet {
    address private immutable owner;

    constructor(address owner_) {
        owner = owner_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return bytes4(0xffffffff);
        (bytes32 r, bytes32 s) = abi.decode(signature[:64], (bytes32, bytes32));
        return ecrecover(hash, uint8(signature[64]), r, s) == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }
}

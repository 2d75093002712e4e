// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

/// @title DepositCollector
/// @notice The code behind every payment's deposit address. The escrow deploys one instance of this
/// contract, and each deposit address is an ERC-1167 clone of it made by the escrow with CREATE2, the
/// salt being the hash of the payment's deposit terms. A clone holds no key and can do one thing: hand
/// its whole balance of a token to the address the escrow names, and only when the escrow asks. The
/// escrow derives that address from the terms behind the salt (the payee, or itself for a hold), so
/// nobody can route a deposit anywhere else. It accepts no ether.
contract DepositCollector {
    using SafeERC20 for IERC20;

    error NotEscrow();

    /// @dev Immutable, so it lives in this contract's code and every clone (which runs this code by
    /// delegatecall) sees the same escrow.
    address private immutable _escrow;

    constructor() {
        _escrow = msg.sender;
    }

    /// @notice Moves this deposit address's whole balance of `token` to `to`; returns the amount.
    function collect(IERC20 token, address to) external returns (uint256 amount) {
        if (msg.sender != _escrow) revert NotEscrow();
        amount = token.balanceOf(address(this));
        if (amount != 0) token.safeTransfer(to, amount);
    }
}

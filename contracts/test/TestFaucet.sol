// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {TestUSDC} from "./TestUSDC.sol";

/// @notice Test-only: mints the test token to many wallets in one transaction, so that the billing
/// benchmark funds 10,000 customers in a few transactions instead of 10,000 (a batch mint on the token
/// itself would lengthen the selector dispatch every charge pays in the gas benchmark).
contract TestFaucet {
    function mintEach(TestUSDC token, address[] calldata recipients, uint256 amount) external {
        for (uint256 i; i < recipients.length; ++i) {
            token.mint(recipients[i], amount);
        }
    }
}

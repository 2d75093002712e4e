// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";

/// @notice Test-only USDC stand-in: 6 decimals, EIP-2612 permit, and a mint anyone may call.
/// Deployed only on local and test chains by the dev stack; never configured on a live chain.
contract TestUSDC is ERC20, ERC20Permit {
    constructor() ERC20("Test USD Coin", "USDC") ERC20Permit("Test USD Coin") {}

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
